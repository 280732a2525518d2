/*
 * tests/unit/api_malloc.c - conformance of pcm_malloc, pcm_free and
 * pcm_malloc_usable_size (glibc's semantics, include/pcmalloc.h).
 *
 * Every size-class boundary (class size, one less, one more) and large
 * sizes; 16-byte alignment; the whole usable size writable and kept until
 * free; malloc(0); free(NULL); errno across free; requests that cannot be
 * met; many live objects that must not overlap.
 * Uses the C library (errno, string.h, qsort): libc platform only.
 */
#include "api_pattern.h"
#include "harness.h"

#include "pcmalloc.h"
#include "sizeclass.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* pcm_malloc(size) with the checks every caller makes: not NULL, 16-byte
 * aligned, usable size at least size (returned in *usable). */
static void *checked_malloc(size_t size, size_t *usable)
{
    void *p = pcm_malloc(size);
    PCM_CHECK(p != NULL, "malloc(%zu) returned NULL (errno %d)", size, errno);
    if (!p)
        return NULL;
    PCM_CHECK((uintptr_t)p % 16 == 0, "malloc(%zu) = %p: not 16-byte aligned", size, p);
    *usable = pcm_malloc_usable_size(p);
    PCM_CHECK(*usable >= size, "malloc(%zu) = %p: usable size %zu", size, p, *usable);
    return p;
}

struct extent {
    uintptr_t start;
    size_t bytes;
};

static int extent_order(const void *a, const void *b)
{
    uintptr_t x = ((const struct extent *)a)->start, y = ((const struct extent *)b)->start;
    return x < y ? -1 : x > y;
}

/* Sort the extents by address and check that no two share a byte (an
 * extent of 0 bytes still claims its address: malloc(0) is unique).
 * Returns the number of overlaps found (the first few are reported). */
static unsigned check_disjoint(struct extent *e, size_t n, const char *what)
{
    qsort(e, n, sizeof *e, extent_order);
    unsigned bad = 0;
    for (size_t i = 1; i < n; i++) {
        size_t claimed = e[i - 1].bytes ? e[i - 1].bytes : 1;
        if (e[i - 1].start + claimed > e[i].start) {
            if (bad++ < 5)
                PCM_CHECK(false, "%s: object %p (%zu usable bytes) overlaps %p", what,
                          (void *)e[i - 1].start, e[i - 1].bytes, (void *)e[i].start);
        }
    }
    return bad;
}

/* ---- every class boundary ---- */

PCM_TEST(malloc_every_class_boundary)
{
    enum { MAX_SIZES = 3 * PCM_CLASS_COUNT };
    static size_t sizes[MAX_SIZES];
    static void *ptrs[MAX_SIZES];
    static struct extent extents[MAX_SIZES];
    size_t n = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        size_t s = pcm_class_size(c);
        sizes[n++] = s - 1;
        sizes[n++] = s;
        sizes[n++] = s + 1; /* the last one, PCM_SMALL_MAX + 1, is large */
    }
    for (size_t i = 0; i < n; i++) {
        size_t usable;
        ptrs[i] = checked_malloc(sizes[i], &usable);
        if (!ptrs[i])
            continue;
        fill(ptrs[i], usable, (uintptr_t)i + 1);
        extents[i].start = (uintptr_t)ptrs[i];
        extents[i].bytes = usable;
    }
    /* Every object, written to its last usable byte, still holds its own
     * bytes once all the others exist: none overlaps another. */
    for (size_t i = 0; i < n; i++) {
        if (!ptrs[i])
            continue;
        size_t usable = pcm_malloc_usable_size(ptrs[i]);
        size_t bad = first_mismatch(ptrs[i], usable, (uintptr_t)i + 1);
        PCM_CHECK(bad == SIZE_MAX, "malloc(%zu) = %p: byte %zu of %zu changed before free",
                  sizes[i], ptrs[i], bad, usable);
    }
    size_t live = 0;
    for (size_t i = 0; i < n; i++)
        if (ptrs[i])
            extents[live++] = (struct extent){(uintptr_t)ptrs[i], pcm_malloc_usable_size(ptrs[i])};
    check_disjoint(extents, live, "class boundaries");
    /* Free in an order unlike the allocation's: odd indexes first. */
    for (size_t i = 1; i < n; i += 2)
        pcm_free(ptrs[i]);
    for (size_t i = 0; i < n; i += 2)
        pcm_free(ptrs[i]);
}

/* ---- large sizes ---- */

PCM_TEST(malloc_large_sizes)
{
    static const size_t sizes[] = {
        PCM_SMALL_MAX + 1,
        PCM_SMALL_MAX + 16,
        PCM_SMALL_MAX + 4096,
        300000,
        MIB - 1,
        MIB,
        MIB + 1,
        4 * MIB - 1,
        4 * MIB,
        4 * MIB + 1,
        16 * MIB + 4097,
        64 * MIB,
    };
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *ptrs[N];
    for (size_t i = 0; i < N; i++) {
        size_t usable;
        ptrs[i] = checked_malloc(sizes[i], &usable);
        if (!ptrs[i])
            continue;
        fill(ptrs[i], usable, (uintptr_t)sizes[i]);
    }
    for (size_t i = 0; i < N; i++) {
        if (!ptrs[i])
            continue;
        size_t usable = pcm_malloc_usable_size(ptrs[i]);
        size_t bad = first_mismatch(ptrs[i], usable, (uintptr_t)sizes[i]);
        PCM_CHECK(bad == SIZE_MAX, "malloc(%zu) = %p: byte %zu of %zu changed before free",
                  sizes[i], ptrs[i], bad, usable);
    }
    for (size_t i = 0; i < N; i++) {
        errno = 1234;
        pcm_free(ptrs[i]);
        PCM_CHECK(errno == 1234, "free(%p) of malloc(%zu) changed errno to %d", ptrs[i], sizes[i],
                  errno);
    }
}

/* ---- malloc(0), free(NULL) ---- */

PCM_TEST(malloc_zero_is_unique_and_freeable)
{
    enum { N = 256 };
    void *ptrs[N];
    struct extent extents[N];
    size_t live = 0;
    for (size_t i = 0; i < N; i++) {
        errno = 1234;
        ptrs[i] = pcm_malloc(0);
        PCM_CHECK(ptrs[i] != NULL, "malloc(0) #%zu returned NULL (errno %d)", i, errno);
        if (!ptrs[i])
            continue;
        PCM_CHECK((uintptr_t)ptrs[i] % 16 == 0, "malloc(0) = %p: not 16-byte aligned", ptrs[i]);
        extents[live++] = (struct extent){(uintptr_t)ptrs[i], pcm_malloc_usable_size(ptrs[i])};
    }
    /* Each pointer differs from every other (and from their usable bytes). */
    check_disjoint(extents, live, "malloc(0)");
    for (size_t i = 0; i < N; i++)
        pcm_free(ptrs[i]);
}

PCM_TEST(free_null_is_a_noop)
{
    errno = 1234;
    pcm_free(NULL);
    PCM_CHECK(errno == 1234, "free(NULL) changed errno to %d", errno);
    PCM_CHECK(pcm_malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu",
              pcm_malloc_usable_size(NULL));
    /* The allocator still works afterwards. */
    void *p = pcm_malloc(24);
    PCM_REQUIRE(p != NULL, "malloc(24) after free(NULL) returned NULL");
    memset(p, 1, 24);
    pcm_free(p);
}

/* ---- errno across free ---- */

PCM_TEST(free_keeps_errno)
{
    /* One object of each kind: small, the largest small, large, large and
     * too big for the cache of freed mappings (so free unmaps it). */
    static const size_t sizes[] = {1, 100, 4096, PCM_SMALL_MAX, PCM_SMALL_MAX + 1, MIB, 64 * MIB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = pcm_malloc(sizes[i]);
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", sizes[i]);
        if (!p)
            continue;
        memset(p, 0x5a, sizes[i]);
        errno = 1234;
        pcm_free(p);
        PCM_CHECK(errno == 1234, "free(%p) of malloc(%zu) changed errno to %d", p, sizes[i], errno);
    }

    /* Many frees of one class: the per-CPU cache overflows and frees take
     * the slow path (flush to spans, spans released). */
    enum { SMALL_N = 4000 };
    static void *small[SMALL_N];
    for (size_t i = 0; i < SMALL_N; i++)
        small[i] = pcm_malloc(2000);
    for (size_t i = 0; i < SMALL_N; i++) {
        PCM_CHECK(small[i] != NULL, "malloc(2000) #%zu returned NULL", i);
        errno = 1234;
        pcm_free(small[i]);
        if (errno != 1234) {
            PCM_CHECK(errno == 1234, "free #%zu of %zu (malloc(2000) = %p) changed errno to %d", i,
                      (size_t)SMALL_N, small[i], errno);
            break;
        }
    }

    /* More freed large mappings than the cache keeps: some frees unmap. */
    enum { LARGE_N = 40 };
    void *large[LARGE_N];
    for (size_t i = 0; i < LARGE_N; i++)
        large[i] = pcm_malloc(MIB + i * 4096);
    for (size_t i = 0; i < LARGE_N; i++) {
        PCM_CHECK(large[i] != NULL, "malloc(%zu) returned NULL", MIB + i * 4096);
        errno = 1234;
        pcm_free(large[i]);
        PCM_CHECK(errno == 1234, "free #%zu (malloc(%zu) = %p) changed errno to %d", i,
                  MIB + i * 4096, large[i], errno);
    }
}

/* ---- requests that cannot be met ---- */

PCM_TEST(malloc_impossible_sizes_fail_with_enomem)
{
    const size_t sizes[] = {
        /* Near SIZE_MAX: adding a header or rounding up to a page or a
         * segment (4 MiB) must not wrap to a small size. */
        SIZE_MAX,
        SIZE_MAX - 1,
        SIZE_MAX - 15,
        SIZE_MAX - 4095,
        SIZE_MAX - 4096,
        SIZE_MAX - (4 * MIB),
        SIZE_MAX - (4 * MIB) - 4096,
        SIZE_MAX - (8 * MIB),
        /* No object may exceed PTRDIFF_MAX (glibc's rule), even where a
         * 32-bit process has 2 GiB of address space free; an object of
         * exactly PTRDIFF_MAX bytes needs a mapping larger than that. */
        SIZE_MAX / 2 + 1,
        SIZE_MAX / 2,
        (size_t)PTRDIFF_MAX,
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        void *p = pcm_malloc(sizes[i]);
        int err = errno;
        PCM_CHECK(p == NULL, "malloc(%zu) = %p, expected NULL", sizes[i], p);
        PCM_CHECK(err == ENOMEM, "malloc(%zu): errno %d, expected ENOMEM (%d)", sizes[i], err,
                  ENOMEM);
        if (p)
            pcm_free(p);
    }
    /* A failed request leaves the allocator working. */
    void *p = pcm_malloc(100), *q = pcm_malloc(MIB);
    PCM_CHECK(p != NULL && q != NULL, "malloc after failures: %p %p", p, q);
    pcm_free(p);
    pcm_free(q);
}

/* ---- many objects do not overlap ---- */

/* Allocate n objects of `size`, fill each (to its usable end) with a
 * pattern derived from its address, check them all, check them disjoint. */
static void many_of_one_size(size_t size, size_t n)
{
    void **ptrs = calloc(n, sizeof *ptrs);
    struct extent *extents = calloc(n, sizeof *extents);
    PCM_REQUIRE(ptrs && extents, "libc calloc for %zu pointers failed", n);
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        void *p = pcm_malloc(size);
        if (!p) {
            PCM_CHECK(p != NULL, "malloc(%zu) #%zu returned NULL (errno %d)", size, i, errno);
            break;
        }
        PCM_CHECK((uintptr_t)p % 16 == 0, "malloc(%zu) #%zu = %p: not 16-byte aligned", size, i, p);
        size_t usable = pcm_malloc_usable_size(p);
        PCM_CHECK(usable >= size, "malloc(%zu) = %p: usable %zu", size, p, usable);
        fill(p, usable, (uintptr_t)p);
        ptrs[got] = p;
        extents[got] = (struct extent){(uintptr_t)p, usable};
        got++;
    }
    unsigned reported = 0;
    for (size_t i = 0; i < got; i++) {
        size_t usable = extents[i].bytes;
        size_t bad = first_mismatch(ptrs[i], usable, (uintptr_t)ptrs[i]);
        if (bad != SIZE_MAX && reported++ < 5)
            PCM_CHECK(bad == SIZE_MAX, "malloc(%zu) #%zu = %p: byte %zu of %zu overwritten", size,
                      i, ptrs[i], bad, usable);
    }
    check_disjoint(extents, got, "many of one size");
    for (size_t i = 0; i < got; i++)
        pcm_free(ptrs[i]);
    free(ptrs);
    free(extents);
}

PCM_TEST(malloc_many_objects_do_not_overlap)
{
    static const size_t sizes[] = {1, 16, 48, 100, 640, 1024, 3000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        many_of_one_size(sizes[i], 10000);
}

/* Random sizes, half freed and replaced at random, all checked at the end:
 * reused memory never overlaps a live object. */
PCM_TEST(malloc_random_churn_keeps_contents)
{
    enum { N = 10000 };
    static void *ptrs[N];
    static struct extent extents[N];
    uint64_t state = pcm_test_seed();
    for (size_t i = 0; i < N; i++) {
        size_t size = (size_t)(pcm_test_rand(&state) % 4097);
        ptrs[i] = pcm_malloc(size);
        PCM_REQUIRE(ptrs[i] != NULL, "malloc(%zu) returned NULL", size);
        fill(ptrs[i], pcm_malloc_usable_size(ptrs[i]), (uintptr_t)ptrs[i]);
    }
    for (unsigned round = 0; round < 4; round++) {
        for (size_t k = 0; k < N / 2; k++) {
            size_t i = (size_t)(pcm_test_rand(&state) % N);
            size_t usable = pcm_malloc_usable_size(ptrs[i]);
            size_t bad = first_mismatch(ptrs[i], usable, (uintptr_t)ptrs[i]);
            PCM_REQUIRE(bad == SIZE_MAX, "round %u: object %p byte %zu of %zu overwritten", round,
                        ptrs[i], bad, usable);
            pcm_free(ptrs[i]);
            size_t size = (size_t)(pcm_test_rand(&state) % (round & 1 ? 40000 : 600));
            ptrs[i] = pcm_malloc(size);
            PCM_REQUIRE(ptrs[i] != NULL, "malloc(%zu) returned NULL", size);
            PCM_CHECK((uintptr_t)ptrs[i] % 16 == 0, "malloc(%zu) = %p: not 16-byte aligned", size,
                      ptrs[i]);
            usable = pcm_malloc_usable_size(ptrs[i]);
            PCM_CHECK(usable >= size, "malloc(%zu) = %p: usable %zu", size, ptrs[i], usable);
            fill(ptrs[i], usable, (uintptr_t)ptrs[i]);
        }
    }
    unsigned reported = 0;
    for (size_t i = 0; i < N; i++) {
        size_t usable = pcm_malloc_usable_size(ptrs[i]);
        size_t bad = first_mismatch(ptrs[i], usable, (uintptr_t)ptrs[i]);
        if (bad != SIZE_MAX && reported++ < 5)
            PCM_CHECK(bad == SIZE_MAX, "object %p: byte %zu of %zu overwritten", ptrs[i], bad,
                      usable);
        extents[i] = (struct extent){(uintptr_t)ptrs[i], usable};
    }
    check_disjoint(extents, N, "random churn");
    for (size_t i = 0; i < N; i++)
        pcm_free(ptrs[i]);
}
