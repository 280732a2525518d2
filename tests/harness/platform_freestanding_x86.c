/*
 * platform_freestanding_x86.c - the harness's platform with no C library,
 * for 32-bit x86 Linux: raw `int $0x80` system calls, forked worker
 * processes, and the few mem* functions GCC may call on its own.
 *
 * Why it exists: the primitive tests must run on a K6-class CPU model
 * (qemu-i386 -cpu pentium: no cmov, no SSE), and Debian's i386 glibc is
 * built for i686 and uses cmov.  This file, start_freestanding_x86.S,
 * harness.c and the tests are built with -march=i586 -ffreestanding
 * -nostdlib -static, linked with -lgcc (64-bit division), and checked by
 * tests/audit/x86_instructions.sh.
 *
 * Workers are processes (fork), not threads, so whatever they share must
 * live in MAP_SHARED mappings: pcm_test_shared_alloc gives exactly that.
 * A worker reports its failed checks through its exit status.
 */
#ifndef __i386__
#error "platform_freestanding_x86.c is for 32-bit x86 Linux only"
#endif

#include "harness.h"
#include "harness_internal.h"

/* ---- system calls (i386: number in %eax, arguments in %ebx, %ecx, %edx,
 * %esi, %edi, %ebp; result or -errno in %eax; nothing else clobbered) ---- */

enum {
    SYS_fork = 2,
    SYS_write = 4,
    SYS_munmap = 91,
    SYS_wait4 = 114,
    SYS_mmap2 = 192,
    SYS_sched_yield = 158,
    SYS_sched_getaffinity = 242,
    SYS_exit_group = 252,
    SYS_clock_gettime = 265, /* 32-bit time_t: fine for CLOCK_MONOTONIC */
};

#define E_INTR 4
#define PROT_READ_WRITE 0x3
#define MAP_SHARED_ 0x01
#define MAP_PRIVATE_ 0x02
#define MAP_ANONYMOUS_ 0x20
#define CLOCK_MONOTONIC_ 1

/* A raw result is an error when it lies in [-4095, -1]. */
static bool sys_failed(long r)
{
    return (unsigned long)r > (unsigned long)-4096L;
}

static long sys0(long n)
{
    long r;
    __asm__ __volatile__("int $0x80" : "=a"(r) : "0"(n) : "memory");
    return r;
}

static long sys1(long n, long a)
{
    long r;
    __asm__ __volatile__("int $0x80" : "=a"(r) : "0"(n), "b"(a) : "memory");
    return r;
}

static long sys2(long n, long a, long b)
{
    long r;
    __asm__ __volatile__("int $0x80" : "=a"(r) : "0"(n), "b"(a), "c"(b) : "memory");
    return r;
}

static long sys3(long n, long a, long b, long c)
{
    long r;
    __asm__ __volatile__("int $0x80" : "=a"(r) : "0"(n), "b"(a), "c"(b), "d"(c) : "memory");
    return r;
}

static long sys4(long n, long a, long b, long c, long d)
{
    long r;
    __asm__ __volatile__("int $0x80"
                         : "=a"(r)
                         : "0"(n), "b"(a), "c"(b), "d"(c), "S"(d)
                         : "memory");
    return r;
}

/* mmap2(NULL, len, prot, flags, -1, 0): anonymous only.  The sixth
 * argument (page offset) goes in %ebp, which cannot be an asm operand: it
 * is saved on the stack and zeroed around the call (all operands are
 * registers, so none is addressed through %ebp or %esp meanwhile). */
static void *sys_mmap_anonymous(size_t len, long prot, long flags)
{
    long r;
    __asm__ __volatile__("pushl %%ebp\n\t"
                         "xorl %%ebp, %%ebp\n\t"
                         "int $0x80\n\t"
                         "popl %%ebp"
                         : "=a"(r)
                         : "0"((long)SYS_mmap2), "b"(0L), "c"((long)len), "d"(prot), "S"(flags),
                           "D"(-1L)
                         : "memory");
    return sys_failed(r) ? NULL : (void *)r;
}

static __attribute__((noreturn)) void sys_exit_group(int code)
{
    for (;;)
        sys1(SYS_exit_group, code);
}

/* ---- the mem* functions GCC may emit calls to (struct copies and
 * clears), on string instructions: a loop in C could be turned back into
 * a call to the very function by -ftree-loop-distribute-patterns.  The
 * psABI guarantees the direction flag is clear on entry. ---- */

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    void *d = dst;
    __asm__ __volatile__("rep; movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
    return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
    if ((uintptr_t)dst - (uintptr_t)src >= n) {
        /* dst below src, or no overlap: copy upwards */
        void *d = dst;
        __asm__ __volatile__("rep; movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
    } else if (n) {
        /* dst overlaps the end of src: copy downwards, last byte first */
        unsigned char *d = (unsigned char *)dst + n - 1;
        const unsigned char *s = (const unsigned char *)src + n - 1;
        __asm__ __volatile__("std\n\t"
                             "rep; movsb\n\t"
                             "cld"
                             : "+D"(d), "+S"(s), "+c"(n)
                             :
                             : "memory");
    }
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    void *d = dst;
    __asm__ __volatile__("rep; stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    for (; n; n--, x++, y++)
        if (*x != *y)
            return *x < *y ? -1 : 1;
    return 0;
}

/* ---- the platform interface of harness.h ---- */

void pcm_test_write(const char *buf, size_t len)
{
    while (len) {
        long n = sys3(SYS_write, 1, (long)buf, (long)len);
        if (n == -E_INTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

void *pcm_test_shared_alloc(size_t bytes)
{
    /* MAP_SHARED: forked workers see one copy at the same address; the
     * kernel hands it out zeroed. */
    if (!bytes)
        return NULL;
    return sys_mmap_anonymous(bytes, PROT_READ_WRITE, MAP_SHARED_ | MAP_ANONYMOUS_);
}

void pcm_test_shared_free(void *p, size_t bytes)
{
    if (p)
        sys2(SYS_munmap, (long)p, (long)bytes);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case 4: return "SIGILL";
    case 5: return "SIGTRAP";
    case 6: return "SIGABRT";
    case 7: return "SIGBUS";
    case 8: return "SIGFPE";
    case 9: return "SIGKILL";
    case 11: return "SIGSEGV";
    case 15: return "SIGTERM";
    default: return "signal";
    }
}

/* Waits for one worker; returns whether it succeeded, printing why not. */
static bool reap_worker(long pid, unsigned index)
{
    int status = 0;
    long r;
    do
        r = sys4(SYS_wait4, pid, (long)&status, 0, 0);
    while (r == -E_INTR);
    if (sys_failed(r)) {
        pcm_test_printf("  worker %u (pid %ld): wait4 failed, error %ld\n", index, pid, -r);
        return false;
    }
    int sig = status & 0x7f;
    if (sig == 0) { /* exited */
        int code = (status >> 8) & 0xff;
        if (code == 0)
            return true;
        if (code == 1)
            pcm_test_printf("  worker %u (pid %ld) exited with status 1: its checks failed\n",
                            index, pid);
        else
            pcm_test_printf("  worker %u (pid %ld) exited with status %d\n", index, pid, code);
        return false;
    }
    pcm_test_printf("  worker %u (pid %ld) killed by signal %d (%s)%s\n", index, pid, sig,
                    signal_name(sig), (status & 0x80) ? ", core dumped" : "");
    return false;
}

int pcm_test_run_workers(unsigned n, void (*fn)(void *arg, unsigned index), void *arg)
{
    if (!n)
        return 0;
    size_t bytes = n * sizeof(long);
    long *pids = sys_mmap_anonymous(bytes, PROT_READ_WRITE, MAP_PRIVATE_ | MAP_ANONYMOUS_);
    if (!pids) {
        pcm_test_fail_from_worker(1);
        pcm_test_printf("  cannot map %u worker records\n", n);
        return -1;
    }
    unsigned started = 0;
    long fork_error = 0;
    for (; started < n; started++) {
        long pid = sys0(SYS_fork);
        if (pid == 0) {
            /* the worker: its failures are those recorded after the fork */
            unsigned before = pcm_test_failures_now();
            fn(arg, started);
            sys_exit_group(pcm_test_failures_now() != before ? 1 : 0);
        }
        if (sys_failed(pid)) {
            fork_error = -pid;
            break;
        }
        pids[started] = pid;
    }
    unsigned failed = 0;
    for (unsigned i = 0; i < started; i++)
        if (!reap_worker(pids[i], i))
            failed++;
    pcm_test_shared_free(pids, bytes);
    if (failed)
        pcm_test_fail_from_worker(failed);
    if (started < n) {
        pcm_test_fail_from_worker(1);
        pcm_test_printf("  could start only %u of %u worker processes (fork error %ld)\n",
                        started, n, fork_error);
        return -1;
    }
    return 0;
}

unsigned pcm_test_cpu_count(void)
{
    /* The CPUs this process may run on: a popcount of the affinity mask
     * (the raw call returns how many bytes of it the kernel filled in). */
    uint32_t mask[32]; /* 1024 CPUs */
    long r = sys3(SYS_sched_getaffinity, 0, (long)sizeof mask, (long)mask);
    if (sys_failed(r) || r <= 0)
        return 1;
    unsigned count = 0;
    for (long w = 0; w < r / 4; w++)
        for (uint32_t m = mask[w]; m; m &= m - 1)
            count++;
    return count ? count : 1;
}

void pcm_test_yield(void)
{
    sys0(SYS_sched_yield);
}

static char **saved_envp;

const char *pcm_test_getenv(const char *name)
{
    if (!saved_envp || !name)
        return NULL;
    for (char **e = saved_envp; *e; e++) {
        const char *s = *e, *n = name;
        while (*n && *s == *n) {
            s++;
            n++;
        }
        if (!*n && *s == '=')
            return s + 1;
    }
    return NULL;
}

uint64_t pcm_test_clock_ns(void)
{
    struct {
        long tv_sec;
        long tv_nsec;
    } ts = {0, 0};
    sys2(SYS_clock_gettime, CLOCK_MONOTONIC_, (long)&ts);
    return (uint64_t)(unsigned long)ts.tv_sec * 1000000000u + (uint64_t)(unsigned long)ts.tv_nsec;
}

void pcm_test_exit(int code)
{
    sys_exit_group(code);
}

/* Called by _start (start_freestanding_x86.S) with the initial stack:
 * sp[0] = argc, then argv[0..argc-1], NULL, then envp, NULL. */
__attribute__((noreturn, used)) void pcm_freestanding_start(uintptr_t *sp);

__attribute__((noreturn, used)) void pcm_freestanding_start(uintptr_t *sp)
{
    uintptr_t argc = sp[0];
    char **argv = (char **)(sp + 1);
    saved_envp = argv + argc + 1;
    pcm_test_exit(pcm_test_main());
}
