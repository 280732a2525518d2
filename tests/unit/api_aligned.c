/*
 * tests/unit/api_aligned.c - conformance of the aligned allocators:
 * pcm_memalign, pcm_aligned_alloc, pcm_posix_memalign, pcm_valloc,
 * pcm_pvalloc, and pcm_free_aligned_sized (glibc's semantics).
 *
 * Every power-of-two alignment from 1 to 2^21 with sizes 0, 1, 17, 4096
 * and 300000 (small and large): the result aligned, at least 16-byte
 * aligned, writable to its usable size, usable >= request; the argument
 * errors (EINVAL) and impossible requests (ENOMEM); memalign's rounding of
 * a non-power-of-two alignment; pvalloc's rounding of the size; and
 * alignments above the segment size.
 * Uses the C library (errno, string.h, sysconf): libc platform only.
 */
#include "api_pattern.h"
#include "harness.h"
#include "harness_internal.h"

#include "pcmalloc.h"
#include "sizeclass.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>


static const size_t test_sizes[] = {0, 1, 17, 4096, 300000};
#define TEST_SIZES (sizeof test_sizes / sizeof test_sizes[0])
#define MAX_ALIGN_SHIFT 21u

/* The page size valloc and pvalloc promise: the kernel's. */
static size_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

/* ---- helpers ---- */

/* One aligned result: check it and fill it.  `align` is what the call
 * promised (the pointer must be a multiple of it, and of 16).  Returns p
 * if it is worth keeping (to check and free later), else NULL. */
static void *check_result(const char *call, void *p, size_t align, size_t size)
{
    PCM_CHECK(p != NULL, "%s(alignment %zu, size %zu) returned NULL (errno %d)", call, align, size,
              errno);
    if (!p)
        return NULL;
    PCM_CHECK((uintptr_t)p % align == 0, "%s(alignment %zu, size %zu) = %p: misaligned", call,
              align, size, p);
    PCM_CHECK((uintptr_t)p % 16 == 0, "%s(alignment %zu, size %zu) = %p: not 16-byte aligned", call,
              align, size, p);
    size_t usable = pcm_malloc_usable_size(p);
    PCM_CHECK(usable >= size, "%s(alignment %zu, size %zu) = %p: usable %zu", call, align, size, p,
              usable);
    fill(p, usable, (uintptr_t)p);
    return p;
}

/* ---- every alignment, every function ---- */

PCM_TEST(aligned_every_power_of_two)
{
    enum { PER_ALIGN = 3 * TEST_SIZES };
    void *live[PER_ALIGN];
    const char *names[PER_ALIGN];
    size_t sizes[PER_ALIGN];
    for (unsigned shift = 0; shift <= MAX_ALIGN_SHIFT; shift++) {
        size_t align = (size_t)1 << shift;
        size_t n = 0;
        for (size_t s = 0; s < TEST_SIZES; s++) {
            size_t size = test_sizes[s];

            errno = 0;
            names[n] = "memalign";
            sizes[n] = size;
            live[n++] = check_result("memalign", pcm_memalign(align, size), align, size);

            errno = 0;
            names[n] = "aligned_alloc";
            sizes[n] = size;
            live[n++] = check_result("aligned_alloc", pcm_aligned_alloc(align, size), align, size);

            void *p = (void *)0x1; /* must be replaced on success */
            int rc = pcm_posix_memalign(&p, align, size);
            names[n] = "posix_memalign";
            sizes[n] = size;
            if (align < sizeof(void *)) {
                PCM_CHECK(rc == EINVAL,
                          "posix_memalign(alignment %zu < sizeof(void *), size %zu) = %d, expected "
                          "EINVAL",
                          align, size, rc);
                PCM_CHECK(p == (void *)0x1, "posix_memalign(alignment %zu) failed but wrote %p",
                          align, p);
                live[n++] = NULL;
            } else {
                PCM_CHECK(rc == 0, "posix_memalign(alignment %zu, size %zu) = %d", align, size, rc);
                live[n++] = rc == 0 ? check_result("posix_memalign", p, align, size) : NULL;
            }
        }
        /* All live at once: each still holds its own bytes. */
        for (size_t i = 0; i < n; i++) {
            if (!live[i])
                continue;
            size_t usable = pcm_malloc_usable_size(live[i]);
            size_t bad = first_mismatch(live[i], usable, (uintptr_t)live[i]);
            PCM_CHECK(bad == SIZE_MAX,
                      "%s(alignment %zu, size %zu) = %p: byte %zu of %zu overwritten", names[i],
                      align, sizes[i], live[i], bad, usable);
        }
        for (size_t i = 0; i < n; i++)
            pcm_free(live[i]);
    }
}

PCM_TEST(valloc_and_pvalloc_are_page_aligned)
{
    const size_t page = page_size();
    const size_t sizes[] = {0,        1,    17,       4095,   4096,       4097,
                            page - 1, page, page + 1, 300000, 3 * MIB + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t size = sizes[i];
        errno = 0;
        void *v = check_result("valloc", pcm_valloc(size), page, size);
        errno = 0;
        void *pv = pcm_pvalloc(size);
        /* pvalloc rounds the size up to whole pages (at least one). */
        size_t rounded = size ? (size + page - 1) / page * page : page;
        if (check_result("pvalloc", pv, page, size)) {
            PCM_CHECK(pcm_malloc_usable_size(pv) >= rounded,
                      "pvalloc(%zu) = %p: usable %zu, less than the %zu bytes of whole pages", size,
                      pv, pcm_malloc_usable_size(pv), rounded);
            /* Whole pages are the caller's: write them all. */
            memset(pv, 0x3c, rounded);
        }
        if (v) {
            size_t bad = first_mismatch(v, pcm_malloc_usable_size(v), (uintptr_t)v);
            PCM_CHECK(bad == SIZE_MAX, "valloc(%zu) = %p: byte %zu overwritten", size, v, bad);
        }
        pcm_free(v);
        pcm_free(pv);
    }
    void *p = pcm_pvalloc(1);
    PCM_CHECK(p != NULL && pcm_malloc_usable_size(p) >= 4096, "pvalloc(1) = %p, usable %zu", p,
              p ? pcm_malloc_usable_size(p) : 0);
    pcm_free(p);
}

/* ---- argument errors ---- */

PCM_TEST(posix_memalign_rejects_bad_alignments)
{
    const size_t bad[] = {0,
                          3,
                          5,
                          6,
                          12,
                          24,
                          48,
                          100,
                          4095,
                          4097,
                          3 * 4096,
                          SIZE_MAX,
                          SIZE_MAX / 2,
                          sizeof(void *) / 2,
                          1,
                          2,
                          sizeof(void *) + 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t s = 0; s < TEST_SIZES; s++) {
            void *p = (void *)0x1;
            int rc = pcm_posix_memalign(&p, bad[i], test_sizes[s]);
            PCM_CHECK(rc == EINVAL,
                      "posix_memalign(alignment %zu, size %zu) = %d, expected EINVAL (%d)", bad[i],
                      test_sizes[s], rc, EINVAL);
            PCM_CHECK(p == (void *)0x1,
                      "posix_memalign(alignment %zu, size %zu) failed but wrote %p", bad[i],
                      test_sizes[s], p);
            if (rc == 0)
                pcm_free(p);
        }
    }
    /* The smallest valid one. */
    void *p = NULL;
    int rc = pcm_posix_memalign(&p, sizeof(void *), 1);
    PCM_CHECK(rc == 0 && p != NULL, "posix_memalign(sizeof(void *) = %zu, 1) = %d, %p",
              sizeof(void *), rc, p);
    pcm_free(p);
}

PCM_TEST(aligned_alloc_rejects_non_powers_of_two)
{
    const size_t bad[] = {0,   3,    5,    6,        12,       24,          48,
                          100, 4095, 4097, 3 * 4096, SIZE_MAX, SIZE_MAX / 2};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t s = 0; s < TEST_SIZES; s++) {
            errno = 0;
            void *p = pcm_aligned_alloc(bad[i], test_sizes[s]);
            int err = errno;
            PCM_CHECK(p == NULL && err == EINVAL,
                      "aligned_alloc(%zu, %zu) = %p errno %d, expected NULL + EINVAL (%d)", bad[i],
                      test_sizes[s], p, err, EINVAL);
            if (p)
                pcm_free(p);
        }
    }
}

PCM_TEST(memalign_rounds_alignment_up)
{
    /* {asked, what the result must be a multiple of} */
    const size_t cases[][2] = {
        {0, 16},      {3, 16},           {5, 16},         {24, 32},
        {48, 64},     {100, 128},        {1000, 1024},    {4095, 4096},
        {4097, 8192}, {3 * 4096, 16384}, {65537, 131072}, {1536 * KIB, 2 * MIB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t s = 0; s < TEST_SIZES; s++) {
            errno = 0;
            void *p = pcm_memalign(cases[i][0], test_sizes[s]);
            if (!p) {
                PCM_CHECK(p != NULL, "memalign(%zu, %zu) returned NULL (errno %d)", cases[i][0],
                          test_sizes[s], errno);
                continue;
            }
            PCM_CHECK((uintptr_t)p % cases[i][1] == 0,
                      "memalign(%zu, %zu) = %p: not a multiple of %zu (alignment rounded up)",
                      cases[i][0], test_sizes[s], p, cases[i][1]);
            size_t usable = pcm_malloc_usable_size(p);
            PCM_CHECK(usable >= test_sizes[s], "memalign(%zu, %zu) = %p: usable %zu", cases[i][0],
                      test_sizes[s], p, usable);
            memset(p, 0x77, usable);
            pcm_free(p);
        }
    }
    /* Above SIZE_MAX / 2 + 1 no power of two is left: EINVAL, as glibc. */
    const size_t hopeless[] = {SIZE_MAX, SIZE_MAX / 2 + 2};
    for (size_t i = 0; i < sizeof hopeless / sizeof hopeless[0]; i++) {
        errno = 0;
        void *p = pcm_memalign(hopeless[i], 1);
        int err = errno;
        PCM_CHECK(p == NULL && err == EINVAL,
                  "memalign(%zu, 1) = %p errno %d, expected NULL + EINVAL", hopeless[i], p, err);
    }
}

/* ---- impossible requests ---- */

PCM_TEST(aligned_impossible_sizes_fail_with_enomem)
{
    const size_t page = page_size();
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX - 4 * MIB, SIZE_MAX / 2 + 1};
    const size_t aligns[] = {16, 64, 4096, 8192, 2 * MIB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
            errno = 0;
            void *p = pcm_memalign(aligns[a], sizes[i]);
            int err = errno;
            PCM_CHECK(p == NULL && err == ENOMEM,
                      "memalign(%zu, %zu) = %p errno %d, expected ENOMEM", aligns[a], sizes[i], p,
                      err);
            pcm_free(p);
            errno = 0;
            p = pcm_aligned_alloc(aligns[a], sizes[i]);
            err = errno;
            PCM_CHECK(p == NULL && err == ENOMEM,
                      "aligned_alloc(%zu, %zu) = %p errno %d, expected ENOMEM", aligns[a], sizes[i],
                      p, err);
            pcm_free(p);
            p = (void *)0x1;
            int rc = pcm_posix_memalign(&p, aligns[a], sizes[i]);
            PCM_CHECK(rc == ENOMEM && p == (void *)0x1,
                      "posix_memalign(%zu, %zu) = %d (out %p), expected ENOMEM and out untouched",
                      aligns[a], sizes[i], rc, p);
            if (rc == 0)
                pcm_free(p);
        }
        errno = 0;
        void *p = pcm_valloc(sizes[i]);
        int err = errno;
        PCM_CHECK(p == NULL && err == ENOMEM, "valloc(%zu) = %p errno %d", sizes[i], p, err);
        pcm_free(p);
        errno = 0;
        p = pcm_pvalloc(sizes[i]);
        err = errno;
        PCM_CHECK(p == NULL && err == ENOMEM, "pvalloc(%zu) = %p errno %d", sizes[i], p, err);
        pcm_free(p);
    }
    /* pvalloc's rounding must not wrap to a small size. */
    const size_t wrap[] = {SIZE_MAX - page + 2, SIZE_MAX - page + 1, SIZE_MAX - 1};
    for (size_t i = 0; i < sizeof wrap / sizeof wrap[0]; i++) {
        errno = 0;
        void *p = pcm_pvalloc(wrap[i]);
        int err = errno;
        PCM_CHECK(p == NULL && err == ENOMEM, "pvalloc(%zu) = %p errno %d (rounding wrapped?)",
                  wrap[i], p, err);
        pcm_free(p);
    }
    /* A power-of-two alignment beyond any address space. */
    errno = 0;
    void *p = pcm_memalign(SIZE_MAX / 2 + 1, 1);
    int err = errno;
    PCM_CHECK(p == NULL && err == ENOMEM, "memalign(%zu, 1) = %p errno %d, expected NULL + ENOMEM",
              SIZE_MAX / 2 + 1, p, err);
    pcm_free(p);
}

/* ---- free_aligned_sized ---- */

PCM_TEST(free_aligned_sized_accepts_what_aligned_alloc_gave)
{
    const size_t sizes[] = {1, 17, 100, 4096, 5000, PCM_SMALL_MAX, PCM_SMALL_MAX + 1, 300000};
    for (unsigned shift = 0; shift <= MAX_ALIGN_SHIFT; shift++) {
        size_t align = (size_t)1 << shift;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            void *p = pcm_aligned_alloc(align, sizes[s]);
            PCM_CHECK(p != NULL && (uintptr_t)p % align == 0, "aligned_alloc(%zu, %zu) = %p", align,
                      sizes[s], p);
            if (!p)
                continue;
            memset(p, 0x11, sizes[s]);
            errno = 1234;
            /* A mismatch it believed it saw would abort the test binary. */
            pcm_free_aligned_sized(p, align, sizes[s]);
            PCM_CHECK(errno == 1234, "free_aligned_sized(%p, %zu, %zu) changed errno to %d", p,
                      align, sizes[s], errno);
        }
    }
    pcm_free_aligned_sized(NULL, 64, 100); /* a no-op, like free(NULL) */
}

/* ---- alignments above the segment size (4 MiB) ---- */

/* Run fn(arg) in a forked child, so that an abort or a crash in pcmalloc
 * fails this one check (with `what` and the signal) instead of ending the
 * whole test binary.  The child's own failed checks print there and make
 * it exit 1.  A raw clone(SIGCHLD), not fork(): glibc's fork hangs in the
 * child under qemu-i386 7.2; with every argument but the flags zero, the
 * call reads the same on every architecture.  The child dumps no core. */
static void in_child(void (*fn)(const void *arg), const void *arg, const char *what)
{
    unsigned before = pcm_test_failures_now();
    pid_t pid = (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    if (pid < 0) {
        PCM_CHECK(pid >= 0, "%s: clone failed (errno %d)", what, errno);
        return;
    }
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        fn(arg);
        _exit(pcm_test_failures_now() != before ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    PCM_CHECK(!WIFSIGNALED(status), "%s: killed by signal %d (see pcmalloc's message above)", what,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    PCM_CHECK(!WIFEXITED(status) || WEXITSTATUS(status) == 0,
              "%s: failed checks in the child (above)", what);
}

struct aligned_case {
    size_t align, size;
};

static void memalign_use_free(const void *arg)
{
    const struct aligned_case *c = arg;
    /* Several tries: a mapping can be more aligned than it must by luck
     * (half of all 4 MiB-aligned addresses are 8 MiB-aligned). */
    for (unsigned t = 0; t < 4; t++) {
        void *p = pcm_memalign(c->align, c->size);
        PCM_REQUIRE(p != NULL, "memalign(%zu, %zu) returned NULL (errno %d)", c->align, c->size,
                    errno);
        PCM_CHECK((uintptr_t)p % c->align == 0, "memalign(%zu, %zu) = %p: misaligned (try %u)",
                  c->align, c->size, p, t);
        size_t usable = pcm_malloc_usable_size(p);
        PCM_CHECK(usable >= c->size, "memalign(%zu, %zu) = %p: usable %zu", c->align, c->size, p,
                  usable);
        memset(p, 0x42, usable);
        pcm_free(p);
    }
}

/* Large objects' mappings start on a segment boundary; an alignment above
 * it still has to be honoured, and free must find the object. */
PCM_TEST(aligned_beyond_segment_size)
{
    const size_t sizes[] = {0, 1, 4096, 300000};
    for (unsigned shift = 22; shift <= 25; shift++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            struct aligned_case c = {(size_t)1 << shift, sizes[s]};
            char what[64];
            snprintf(what, sizeof what, "memalign(%zu, %zu)", c.align, c.size);
            in_child(memalign_use_free, &c, what);
        }
    }
}
