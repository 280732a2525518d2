/*
 * tests/harness/address_limit.h - limit this process's address space
 * (RLIMIT_AS) to what it has now plus `headroom` bytes, so that mmap runs
 * out as in a full 32-bit process; for a forked child (the limit stays
 * with the process).  libc platform only.
 */
#ifndef PCM_TEST_ADDRESS_LIMIT_H
#define PCM_TEST_ADDRESS_LIMIT_H

#include "harness.h"

#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* True if the limit is set and binds: under qemu-user a 64-bit guest's
 * memory lies in the emulator's own reservation, where the host's
 * RLIMIT_AS never sees it (a 2 GiB mapping beyond the limit succeeds).
 * Never set under ThreadSanitizer or AddressSanitizer, whose runtimes ran
 * out of memory under it ("internal allocator is out of memory"). */
static inline bool pcm_test_limit_address_space(size_t headroom)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    (void)headroom;
    return false; /* their runtimes' own memory needs the address space */
#endif
    char text[128];
    if (!pcm_test_read_file("/proc/self/statm", text, sizeof text))
        return false;
    rlim_t limit = (rlim_t)strtoul(text, NULL, 10) * 4096 + headroom;
    struct rlimit r = {limit, limit};
    if (setrlimit(RLIMIT_AS, &r) != 0)
        return false;
    size_t probe = headroom + ((size_t)1 << 30);
    void *p = mmap(NULL, probe, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return true;
    munmap(p, probe);
    return false;
}

#endif
