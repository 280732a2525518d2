/*
 * tests/unit/api_calloc.c - conformance of pcm_calloc: the memory is zero
 * (also when it was just freed dirty: reused small objects, reused large
 * mappings from the cache of freed mappings), count * size overflow is
 * NULL + ENOMEM, a zero count or size gives a unique freeable pointer.
 * Uses the C library (errno, string.h): libc platform only.
 */
#include "api_pattern.h"
#include "harness.h"

#include "pcmalloc.h"
#include "sizeclass.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>


/* Offset of the first non-zero byte of p[0 .. n-1], or SIZE_MAX. */
static size_t first_nonzero(const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i = 0;
    /* Word at a time where aligned (large objects make this worth it). */
    for (; i < n && (uintptr_t)(b + i) % sizeof(size_t); i++)
        if (b[i])
            return i;
    for (; i + sizeof(size_t) <= n; i += sizeof(size_t))
        if (*(const size_t *)(const void *)(b + i))
            break;
    for (; i < n; i++)
        if (b[i])
            return i;
    return SIZE_MAX;
}

/* Every size class boundary and then large sizes, as calloc(1, size). */
static size_t boundary_sizes(size_t *out, size_t cap)
{
    size_t n = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT && n + 3 <= cap; c++) {
        size_t s = pcm_class_size(c);
        out[n++] = s - 1;
        out[n++] = s;
        out[n++] = s + 1;
    }
    return n;
}

/* ---- fresh memory ---- */

PCM_TEST(calloc_fresh_memory_is_zero)
{
    size_t sizes[3 * PCM_CLASS_COUNT + 8];
    size_t n = boundary_sizes(sizes, 3 * PCM_CLASS_COUNT);
    sizes[n++] = MIB;
    sizes[n++] = 4 * MIB + 1;
    sizes[n++] = 20 * MIB;
    for (size_t i = 0; i < n; i++) {
        void *p = pcm_calloc(1, sizes[i]);
        PCM_CHECK(p != NULL, "calloc(1, %zu) returned NULL (errno %d)", sizes[i], errno);
        if (!p)
            continue;
        PCM_CHECK((uintptr_t)p % 16 == 0, "calloc(1, %zu) = %p: not 16-byte aligned", sizes[i], p);
        PCM_CHECK(pcm_malloc_usable_size(p) >= sizes[i], "calloc(1, %zu) = %p: usable %zu",
                  sizes[i], p, pcm_malloc_usable_size(p));
        size_t bad = first_nonzero(p, sizes[i]);
        PCM_CHECK(bad == SIZE_MAX, "calloc(1, %zu) = %p: byte %zu not zero", sizes[i], p, bad);
        pcm_free(p);
    }
}

/* ---- memory freed dirty, then calloc'ed ---- */

/* malloc `size`, dirty all its usable bytes with 0xAA, free it, and then
 * `rounds` times: calloc the same bytes (as count * elem), check the
 * requested bytes are zero, dirty the object, free it.  The same object
 * comes back often (the per-CPU cache is LIFO, the large cache keeps the
 * mapping), so calloc must clear what free left.  Returns how many callocs
 * reused an address freed just before. */
static unsigned dirty_then_calloc(size_t count, size_t elem, unsigned rounds)
{
    size_t size = count * elem;
    void *p = pcm_malloc(size);
    if (!p) {
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", size);
        return 0;
    }
    memset(p, 0xAA, pcm_malloc_usable_size(p));
    void *last = p;
    pcm_free(p);
    unsigned reused = 0;
    for (unsigned r = 0; r < rounds; r++) {
        void *q = pcm_calloc(count, elem);
        if (!q) {
            PCM_CHECK(q != NULL, "calloc(%zu, %zu) returned NULL (errno %d)", count, elem, errno);
            return reused;
        }
        reused += q == last;
        size_t bad = first_nonzero(q, size);
        PCM_CHECK(bad == SIZE_MAX,
                  "calloc(%zu, %zu) = %p (round %u, %s the object just freed): byte %zu is 0x%x",
                  count, elem, q, r, q == last ? "reusing" : "not", bad,
                  bad == SIZE_MAX ? 0u : ((unsigned char *)q)[bad]);
        memset(q, 0xAA, pcm_malloc_usable_size(q));
        last = q;
        pcm_free(q);
    }
    return reused;
}

PCM_TEST(calloc_zeroes_reused_small_objects)
{
    size_t sizes[3 * PCM_CLASS_COUNT];
    size_t n = boundary_sizes(sizes, 3 * PCM_CLASS_COUNT);
    unsigned reused = 0;
    for (size_t i = 0; i < n; i++) {
        if (sizes[i] > PCM_SMALL_MAX)
            continue;
        reused += dirty_then_calloc(1, sizes[i], 4);
        if (sizes[i] % 16 == 0 && sizes[i] >= 32)
            reused += dirty_then_calloc(sizes[i] / 16, 16, 2); /* count > 1 */
    }
    /* The test is only worth something if freed memory came back. */
    PCM_CHECK(reused > 0, "no calloc reused a just-freed small object: nothing dirty was tested");
}

PCM_TEST(calloc_zeroes_reused_large_mappings)
{
    static const size_t sizes[] = {
        PCM_SMALL_MAX + 1, 300000, MIB - 1, MIB, MIB + 4096, 3 * MIB + 5, 4 * MIB, 8 * MIB + 1,
    };
    /* Start with an empty cache of freed mappings: a full one would unmap
     * what this test frees instead of handing it back. */
    pcm_malloc_trim(0);
    unsigned reused = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        reused += dirty_then_calloc(1, sizes[i], 4);
    PCM_CHECK(reused > 0,
              "no calloc reused a just-freed large mapping: the cache path was not tested");
}

/* A freed large mapping may serve a smaller request (one needing at least
 * half of it): the request must be zero although the mapping was dirtied
 * to its last byte. */
PCM_TEST(calloc_zeroes_a_larger_cached_mapping)
{
    static const size_t pairs[][2] = {
        {2 * MIB, MIB + 1}, {2 * MIB, 1536 * KIB},  {MIB, 600 * KIB},
        {4 * MIB, 3 * MIB}, {600 * KIB, 300 * KIB}, {8 * MIB, 5 * MIB},
    };
    pcm_malloc_trim(0); /* room in the cache of freed mappings */
    unsigned reused = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        size_t big = pairs[i][0], small = pairs[i][1];
        void *p = pcm_malloc(big);
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", big);
        if (!p)
            continue;
        memset(p, 0xAA, pcm_malloc_usable_size(p));
        pcm_free(p);
        void *q = pcm_calloc(small, 1);
        PCM_CHECK(q != NULL, "calloc(%zu, 1) returned NULL", small);
        if (!q)
            continue;
        size_t bad = first_nonzero(q, small);
        PCM_CHECK(bad == SIZE_MAX,
                  "malloc(%zu) = %p dirtied and freed, calloc(%zu, 1) = %p: byte %zu not zero", big,
                  p, small, q, bad);
        reused += q == p;
        pcm_free(q);
    }
    PCM_CHECK(reused > 0, "no calloc reused a larger freed mapping: the case was not tested");
}

/* Large objects shrunk or grown by realloc, dirtied and freed, then
 * calloc'ed: the mapping's new size must not leave dirty bytes behind. */
PCM_TEST(calloc_zeroes_mappings_resized_by_realloc)
{
    static const size_t steps[][2] = {
        {8 * MIB, 3 * MIB},    /* shrunk by more than half: tail unmapped */
        {2 * MIB, 1536 * KIB}, /* shrunk in place */
        {MIB, 3 * MIB},        /* grown */
        {300 * KIB, 700 * KIB},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        size_t from = steps[i][0], to = steps[i][1];
        void *p = pcm_malloc(from);
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", from);
        if (!p)
            continue;
        memset(p, 0xAA, pcm_malloc_usable_size(p));
        void *q = pcm_realloc(p, to);
        PCM_CHECK(q != NULL, "realloc(%p, %zu) returned NULL", p, to);
        if (!q) {
            pcm_free(p);
            continue;
        }
        memset(q, 0xAA, pcm_malloc_usable_size(q));
        pcm_free(q);
        for (unsigned r = 0; r < 3; r++) {
            size_t want = r == 0 ? to : r == 1 ? from : to / 2 + 4096;
            void *z = pcm_calloc(1, want);
            PCM_CHECK(z != NULL, "calloc(1, %zu) returned NULL", want);
            if (!z)
                continue;
            size_t bad = first_nonzero(z, want);
            PCM_CHECK(bad == SIZE_MAX,
                      "malloc(%zu), realloc to %zu = %p, dirtied, freed; calloc(1, %zu) = %p: byte "
                      "%zu not zero",
                      from, to, q, want, z, bad);
            memset(z, 0xAA, pcm_malloc_usable_size(z));
            pcm_free(z);
        }
    }
}

/* ---- overflow and zero ---- */

PCM_TEST(calloc_overflow_fails_with_enomem)
{
    const size_t half_bits = (size_t)1 << (sizeof(size_t) * 4);
    const size_t pairs[][2] = {
        {SIZE_MAX, 2},
        {2, SIZE_MAX},
        {SIZE_MAX, SIZE_MAX},
        {SIZE_MAX / 2 + 1, 2},
        {SIZE_MAX / 3 + 1, 3},
        {half_bits, half_bits},
        {half_bits + 1, half_bits + 1},
        {SIZE_MAX / 16 + 1, 16},
        {16, SIZE_MAX / 16 + 1},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        errno = 0;
        void *p = pcm_calloc(pairs[i][0], pairs[i][1]);
        int err = errno;
        PCM_CHECK(p == NULL, "calloc(%zu, %zu) = %p, expected NULL (product overflows)",
                  pairs[i][0], pairs[i][1], p);
        PCM_CHECK(err == ENOMEM, "calloc(%zu, %zu): errno %d, expected ENOMEM (%d)", pairs[i][0],
                  pairs[i][1], err, ENOMEM);
        if (p)
            pcm_free(p);
    }
    /* No overflow, but no memory either (or a size no object may have:
     * above PTRDIFF_MAX, which a 32-bit process might otherwise map). */
    const size_t huge[][2] = {{1, SIZE_MAX},         {SIZE_MAX, 1},           {SIZE_MAX / 16, 16},
                              {2, SIZE_MAX / 2},     {1, SIZE_MAX / 2 + 1}, /* above PTRDIFF_MAX */
                              {SIZE_MAX / 2 + 1, 1}, {1, (size_t)PTRDIFF_MAX}};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        errno = 0;
        void *p = pcm_calloc(huge[i][0], huge[i][1]);
        int err = errno;
        PCM_CHECK(p == NULL && err == ENOMEM,
                  "calloc(%zu, %zu) = %p errno %d, expected NULL + ENOMEM", huge[i][0], huge[i][1],
                  p, err);
        if (p)
            pcm_free(p);
    }
    void *p = pcm_calloc(10, 10);
    PCM_CHECK(p != NULL && first_nonzero(p, 100) == SIZE_MAX, "calloc(10, 10) after failures: %p",
              p);
    pcm_free(p);
}

PCM_TEST(calloc_zero_is_unique_and_freeable)
{
    const size_t pairs[][2] = {{0, 0},   {0, 1},        {1, 0},       {0, 100},
                               {100, 0}, {0, SIZE_MAX}, {SIZE_MAX, 0}};
    enum { N = sizeof pairs / sizeof pairs[0], REPEAT = 8 };
    void *ptrs[N * REPEAT];
    for (size_t k = 0; k < N * REPEAT; k++) {
        size_t i = k % N;
        errno = 1234;
        ptrs[k] = pcm_calloc(pairs[i][0], pairs[i][1]);
        PCM_CHECK(ptrs[k] != NULL, "calloc(%zu, %zu) returned NULL (errno %d)", pairs[i][0],
                  pairs[i][1], errno);
        PCM_CHECK((uintptr_t)ptrs[k] % 16 == 0, "calloc(%zu, %zu) = %p: not 16-byte aligned",
                  pairs[i][0], pairs[i][1], ptrs[k]);
        for (size_t j = 0; j < k; j++)
            PCM_CHECK(ptrs[j] != ptrs[k] || !ptrs[k],
                      "calloc(%zu, %zu) #%zu = %p, already returned (#%zu)", pairs[i][0],
                      pairs[i][1], k, ptrs[k], j);
    }
    for (size_t k = 0; k < N * REPEAT; k++)
        pcm_free(ptrs[k]);
}
