/*
 * tests/unit/rseq_layout.c - the binary layout the restartable sections'
 * assembly produced (arch/<arch>/arch_rseq.h), read back from this very
 * program: every descriptor in section __rseq_cs is one the kernel will
 * accept and act on correctly - version and flags 0, a short section, an
 * abort handler outside the section and right behind the signature glibc
 * registered (RSEQ_SIG), which the kernel checks before jumping there.  A
 * wrong label or a misplaced signature would otherwise only show as a
 * process killed with SIGSEGV the first time a section is interrupted.
 * Runs anywhere (also under qemu-user): it only reads memory.
 */
#include "harness.h"

#include "percpu_rseq.h"

#include <string.h>
#include <sys/rseq.h>

extern const struct rseq_cs __start___rseq_cs[] __attribute__((weak));
extern const struct rseq_cs __stop___rseq_cs[] __attribute__((weak));

PCM_TEST(rseq_descriptors_are_valid)
{
#ifndef PCM_ARCH_RSEQ
    PCM_CHECK((uintptr_t)__start___rseq_cs == (uintptr_t)__stop___rseq_cs,
              "a build without rseq sections has descriptors");
    pcm_test_printf("  no restartable sections in this build (%s)\n", PCM_ARCH_NAME);
#else
    const struct rseq_cs *d = __start___rseq_cs, *end = __stop___rseq_cs;
    PCM_REQUIRE(d && end, "no __rseq_cs section in an rseq build");
    unsigned count = 0;
    for (; d < end; d++, count++) {
        uintptr_t start = (uintptr_t)d->start_ip, abort_ip = (uintptr_t)d->abort_ip;
        PCM_CHECK(((uintptr_t)d & 31) == 0, "descriptor %u at %p is not 32-byte aligned", count, (const void *)d);
        PCM_CHECK(d->version == 0 && d->flags == 0, "descriptor %u: version %u flags %u", count, d->version,
                  d->flags);
        PCM_CHECK(d->post_commit_offset > 0 && d->post_commit_offset < 128,
                  "descriptor %u: a section of %llu bytes", count, (unsigned long long)d->post_commit_offset);
        PCM_CHECK(abort_ip < start || abort_ip >= start + d->post_commit_offset,
                  "descriptor %u: the abort handler %p lies inside its section", count, (void *)abort_ip);
        uint32_t signature;
        memcpy(&signature, (const void *)(abort_ip - 4), 4);
        PCM_CHECK(signature == RSEQ_SIG, "descriptor %u: %08x before the abort handler, not RSEQ_SIG %08x", count,
                  signature, (uint32_t)RSEQ_SIG);
    }
    /* pop, push and take-all, each inlined at least once */
    PCM_CHECK(count >= 3, "only %u descriptors", count);
    pcm_test_printf("  %u descriptors checked\n", count);
#endif
}
