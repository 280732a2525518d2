/*
 * os.h - the platform layer: every request pcmalloc makes of the kernel.
 *
 * The rest of the allocator gets address space, CPU numbers, the clock
 * and the environment only through these functions, so a port to another
 * kernel replaces os_linux.c and os_linux_vdso.c.  None of them calls
 * malloc or stdio, takes a lock or uses thread-local storage beyond errno:
 * they run inside malloc, before constructors and inside ld.so's early
 * calls.
 *
 * Errors: functions that return memory return NULL on failure (never
 * MAP_FAILED) with errno == ENOMEM, which is what malloc must report.
 */
#ifndef PCM_OS_H
#define PCM_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Anonymous private read/write memory, zero-filled, page-aligned.  NULL
 * and errno == ENOMEM on failure (also for bytes == 0). */
void *pcm_os_map(size_t bytes);

/* The same for a large table whose pages are mostly never touched: no
 * swap or commit charge is reserved for it (MAP_NORESERVE). */
void *pcm_os_map_sparse(size_t bytes);

/* A fresh mapping of `bytes` exactly at `at` (page-aligned), if that
 * address space is free; else NULL and nothing mapped (never MAP_FIXED:
 * whatever is there stays). */
void *pcm_os_map_at(void *at, size_t bytes);

/*
 * The same, starting at a multiple of `alignment` (a power of two; at or
 * below the page size this is pcm_os_map).  Maps bytes + alignment - page
 * and unmaps the unaligned head and the tail beyond `bytes` (rounded up to
 * pages), so no address space stays reserved beyond what was asked for.
 * NULL and errno == ENOMEM on failure; errno == EINVAL, NULL when
 * alignment is not a power of two (a caller bug).
 */
void *pcm_os_map_aligned(size_t bytes, size_t alignment);

/* Unmapping, decommitting and moving work on at most this many bytes a
 * system call, cut at its multiples (os_linux.c says why). */
#define PCM_OS_PIECE_BYTES ((size_t)2 << 20)

/* Give back a mapping or any page-aligned part of one.  p == NULL is a
 * no-op.  Only for memory no other thread may still read: see decommit. */
void pcm_os_unmap(void *p, size_t bytes);

/* Unmap [p, p + bytes) in one call, all or nothing: false (errno set)
 * if the kernel refused, as it does when the unmap would split a mapping
 * at vm.max_map_count.  One call, not pieces: for a range whose pages are
 * decommitted already, which the pieces' reason (os_linux.c) does not
 * touch.  Only for memory no other thread may still read. */
bool pcm_os_unmap_whole(void *p, size_t bytes);

/*
 * Release the physical pages behind [p, p + bytes) (page-aligned) but keep
 * the range mapped: it reads as zeros afterwards and is repopulated on the
 * next touch.  This, not unmap, is how memory that a concurrent lock-free
 * pop may still read goes back to the OS: a stale read of it must never
 * fault.  Returns false (errno set) if the kernel refused.
 */
bool pcm_os_decommit(void *p, size_t bytes);

/* Ask that [p, p + bytes) (page-aligned) be backed by small pages only:
 * for metadata written sparsely, where one transparent huge page would
 * commit 2 MiB for a few bytes.  Best effort; nothing depends on it. */
void pcm_os_no_huge_pages(void *p, size_t bytes);

/*
 * Ask the kernel to back [p, p + bytes) with transparent huge pages where
 * it can (madvise MADV_HUGEPAGE; it matters where THP is "madvise", the
 * common default).  Call it before the range's first touch: a 2 MiB range
 * that already has small pages keeps them until khugepaged collapses it.
 * Returns false if the kernel refused (no THP support): nothing changes.
 */
bool pcm_os_hugepage(void *p, size_t bytes);

/* Make [p, p + bytes) (kernel-page-aligned) a guard: no access, so a
 * read or write there faults (the hardened build's guard pages).  False
 * (errno set) if the kernel refused. */
bool pcm_os_guard(void *p, size_t bytes);

/* Fill buf with len random bytes from the kernel, without blocking; false
 * if it has none to give (the caller falls back to AT_RANDOM). */
bool pcm_os_random(void *buf, size_t len);

/* Grow or shrink a mapping without moving it (mremap without MAYMOVE):
 * NULL + ENOMEM if the pages above it are taken. */
void *pcm_os_remap_in_place(void *p, size_t old_bytes, size_t new_bytes);

/* Move a mapping onto `target` (page-aligned, new_bytes >= old_bytes
 * long, normally a reservation of ours, which it replaces), resized to
 * new_bytes, without copying: the first old_bytes hold p's contents, the
 * rest reads as zeros, p's range is unmapped.  Returns target, or NULL +
 * ENOMEM leaving both as they were.  (Moved in pieces: if the kernel
 * refuses after the first, the rest is copied, so it still succeeds.) */
void *pcm_os_remap_fixed(void *p, size_t old_bytes, size_t new_bytes, void *target);

/* The kernel's page size (4 KiB on x86; 4, 16 or 64 KiB on arm64). */
size_t pcm_os_page_size(void);

/* Milliseconds of CLOCK_MONOTONIC_COARSE (the decay's clock), read
 * through the vDSO without libc's wrapper (os_linux_vdso.c says why). */
unsigned long pcm_os_monotonic_ms(void);

/* CLOCK_MONOTONIC in nanoseconds, the same way, modulo 2^32 (a wrap every
 * 4.3 s): for spans of microseconds, compared by unsigned difference (the
 * caches' growth, heap.c).  About 23 ns a read through the vDSO on x86_64,
 * where the coarse clock takes 5 but steps only once a tick. */
uint32_t pcm_os_monotonic_ns32(void);

/* For tests: whether that clock is the vDSO's, and the address of a
 * function the vDSO exports (NULL: no vDSO, or no such name). */
bool pcm_os_vdso_clock_found(void);
void *pcm_os_vdso_symbol(const char *name);

/*
 * How many per-CPU slots the allocator needs: one more than the highest
 * *possible* CPU number (the kernel's nr_cpu_ids), from
 * /sys/devices/system/cpu/possible ("0-7", "0,2-5", ...).  This is the
 * count of possible CPUs when their numbers have no holes; with holes it
 * is larger, because CPU numbers index per-CPU arrays.  Possible, not
 * online: a CPU brought online later already has its slot.
 * Fallbacks: if /sys cannot be read or parsed, one more than the highest
 * CPU in this thread's affinity mask (sched_getaffinity, up to 1024
 * CPUs); if that fails too, 1.  On the fallback paths a CPU number from
 * pcm_os_current_cpu may exceed the count, so callers always reduce it.
 * Reads files; meant for start-up, not the hot path.  errno is preserved.
 */
unsigned pcm_os_cpu_count(void);
/* The same from /sys alone: 0 where it cannot be read, so that a caller
 * that must bound every CPU number the kernel gives (the rseq path) can
 * tell the exact count from a guess.  errno is preserved. */
unsigned pcm_os_possible_cpus(void);

/* The parser behind pcm_os_cpu_count, exposed for its unit test: the
 * highest CPU number in a kernel CPU list + 1, or 0 if text[0..len) is
 * not a well-formed list (a trailing newline is allowed). */
unsigned pcm_os_parse_cpu_list(const char *text, size_t len);

/* Restart every restartable sequence a thread of this process is running
 * on CPU `cpu` now (membarrier's private expedited rseq fence, Linux 5.10
 * and later), with a full memory barrier on both sides: when it returns,
 * a section there either ended before the call or starts again, and then
 * sees every store the caller made before it.  False where the kernel
 * cannot (no membarrier, no rseq, or the process may not register for
 * it); registers on the first call. */
bool pcm_os_rseq_fence(unsigned cpu);

/* A thread of pcmalloc's own (os_linux_thread.c): starts body() in a new
 * detached thread named `name` (15 characters at most), with every signal
 * the program can send blocked, so that no handler of the program's ever
 * runs on it.  Not from inside malloc's locks, nor before the C library's
 * constructors have run: the thread library allocates (through pcmalloc)
 * to make it.  False if it could not be started; errno is preserved. */
bool pcm_os_start_thread(void (*body)(void), const char *name);

/* Sleeps `ms` milliseconds (on through interruptions); errno is preserved. */
void pcm_os_sleep_ms(unsigned long ms);

/* The CPU this thread is running on now (sched_getcpu(), a few ns where
 * glibc has rseq or the vDSO), or -1 if the kernel cannot say; errno is
 * then whatever sched_getcpu left.  It may be stale by the time it is
 * used: the thread can migrate at any instruction. */
int pcm_os_current_cpu(void);

/*
 * getenv that works before libc's constructors have run and never
 * allocates.  Returns the value (not to be modified) or NULL if unset.
 *  - Normally `environ` is set (libc.so initialises it before any other
 *    constructor runs) and is searched, so setenv/putenv changes are seen.
 *  - When environ is NULL - a call from ld.so or a constructor that runs
 *    before libc.so's own initialiser, an early static-binary call, or
 *    after clearenv() - the environment the process was started with is
 *    read once from /proc/self/environ into a static 16 KiB buffer.  Only
 *    whole NAME=value entries within its first 16 KiB are seen (a cut
 *    entry is dropped, never read half); without /proc the answer is NULL.
 * The one-time read is not synchronised: it is meant for start-up, which
 * is single-threaded or behind the caller's own once-guard.  errno is
 * preserved.
 */
const char *pcm_os_getenv(const char *name);

/* The index-th "NAME=value" entry of the environment pcm_os_getenv
 * searches (environ, or the start-up copy), or NULL past the last; for
 * listing variables by prefix.  Same rules and caveats as pcm_os_getenv. */
const char *pcm_os_env_entry(size_t index);

/*
 * Test-only fault injection: the system calls this layer makes can be told
 * to fail as if the kernel had said ENOMEM, so tests can check that every
 * failure reaches the caller as NULL + ENOMEM (or is absorbed) and costs
 * no memory.  The state is plain statics, not atomics (src/ uses atomics
 * only through atomic.h, and this is not worth one): arm and read it while
 * the process has a single thread.  Disarmed (the default), it costs one
 * load and a predictable branch per system call.  munmap is not counted:
 * it cannot fail for lack of memory.
 */
enum pcm_os_call {
    PCM_OS_CALL_MMAP = 1u,    /* pcm_os_map, pcm_os_map_aligned */
    PCM_OS_CALL_MREMAP = 2u,  /* pcm_os_remap_in_place, pcm_os_remap_fixed */
    PCM_OS_CALL_MADVISE = 4u, /* pcm_os_decommit */
    PCM_OS_CALL_ANY = 7u
};

/* From now on count the calls of the kinds in `calls` (a mask), and make
 * the n-th of them fail (n < 1 counts as 1); later ones succeed again, or,
 * if `persistent`, fail too until pcm_os_fault_disarm.  n == LONG_MAX
 * only counts (a dry run that learns how many calls a workload makes). */
void pcm_os_fault_arm(unsigned calls, long n, bool persistent);
void pcm_os_fault_disarm(void);
/* Calls of the kinds in `call` (a mask) made since the last arm, the
 * failed ones included. */
unsigned long pcm_os_fault_seen(unsigned call);

/* The older form: n >= 1 makes the n-th following call of any kind fail
 * once (n == 0 counts as 1); n < 0 disarms. */
void pcm_os_fail_after(long n);

#endif
