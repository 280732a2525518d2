/*
 * tests/unit/api_realloc.c - conformance of pcm_realloc and
 * pcm_reallocarray: realloc(NULL, n) is malloc(n), realloc(p, 0) frees p
 * and returns NULL, contents survive growth and shrinking across every
 * size class and into and out of the large range, growth of a large
 * object 4 KiB at a time is amortised, and a request that cannot be met
 * (or whose count * size overflows) returns NULL + ENOMEM with the old
 * object intact.
 * Uses the C library (errno, string.h, malloc.h): libc platform only.
 */
#include "api_pattern.h"
#include "harness.h"

#include "pcmalloc.h"
#include "sizeclass.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- realloc(NULL, n) and realloc(p, 0) ---- */

PCM_TEST(realloc_null_is_malloc)
{
    static const size_t sizes[] = {0,      1,      16, 100, 4096, PCM_SMALL_MAX, PCM_SMALL_MAX + 1,
                                   300000, 5 * MIB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 1234;
        void *p = pcm_realloc(NULL, sizes[i]);
        PCM_CHECK(p != NULL, "realloc(NULL, %zu) returned NULL (errno %d)", sizes[i], errno);
        if (!p)
            continue;
        PCM_CHECK((uintptr_t)p % 16 == 0, "realloc(NULL, %zu) = %p: not 16-byte aligned", sizes[i],
                  p);
        size_t usable = pcm_malloc_usable_size(p);
        PCM_CHECK(usable >= sizes[i], "realloc(NULL, %zu) = %p: usable %zu", sizes[i], p, usable);
        fill_range(p, 0, usable, 7);
        size_t bad = first_mismatch(p, usable, 7);
        PCM_CHECK(bad == SIZE_MAX,
                  "realloc(NULL, %zu) = %p: byte %zu did not keep what was written", sizes[i], p,
                  bad);
        pcm_free(p);
    }
    /* reallocarray(NULL, n, m) is malloc(n * m). */
    void *p = pcm_reallocarray(NULL, 10, 10);
    PCM_CHECK(p != NULL && pcm_malloc_usable_size(p) >= 100, "reallocarray(NULL, 10, 10) = %p", p);
    pcm_free(p);
}

PCM_TEST(realloc_to_zero_frees_and_returns_null)
{
    static const size_t sizes[] = {0, 1, 100, 4096, PCM_SMALL_MAX, PCM_SMALL_MAX + 1, MIB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = pcm_malloc(sizes[i]);
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", sizes[i]);
        if (!p)
            continue;
        errno = 1234;
        void *q = pcm_realloc(p, 0);
        PCM_CHECK(q == NULL, "realloc(%p, 0) of malloc(%zu) = %p, expected NULL", p, sizes[i], q);
        PCM_CHECK(errno == 1234, "realloc(%p, 0) of malloc(%zu) changed errno to %d", p, sizes[i],
                  errno);
        if (q)
            pcm_free(q);
    }

    /* It freed: a large mapping too big for the cache goes back at once.
     * (The cache emptied first: a malloc may grow a cached mapping.) */
    pcm_malloc_trim(0);
    struct mallinfo2 before = pcm_mallinfo2();
    void *big = pcm_malloc(64 * MIB);
    PCM_REQUIRE(big != NULL, "malloc(64 MiB) returned NULL");
    struct mallinfo2 during = pcm_mallinfo2();
    PCM_CHECK(during.hblkhd >= before.hblkhd + 64 * MIB, "malloc(64 MiB): hblkhd %zu -> %zu",
              before.hblkhd, during.hblkhd);
    PCM_CHECK(pcm_realloc(big, 0) == NULL, "realloc(%p, 0) of 64 MiB not NULL", big);
    struct mallinfo2 after = pcm_mallinfo2();
    PCM_CHECK(after.hblkhd + 64 * MIB <= during.hblkhd,
              "realloc(%p, 0) of 64 MiB did not free it: hblkhd %zu -> %zu", big, during.hblkhd,
              after.hblkhd);

    /* ...and small objects: a loop that would leak 100 MiB maps little. */
    before = pcm_mallinfo2();
    unsigned long rounds = pcm_test_scale(100000);
    for (unsigned long i = 0; i < rounds; i++) {
        void *p = pcm_malloc(1000);
        PCM_REQUIRE(p != NULL, "malloc(1000) #%lu returned NULL", i);
        PCM_REQUIRE(pcm_realloc(p, 0) == NULL, "realloc(%p, 0) not NULL", p);
    }
    after = pcm_mallinfo2();
    PCM_CHECK(after.arena <= before.arena + 4 * MIB,
              "%lu x (malloc(1000), realloc(p, 0)): segments grew %zu -> %zu bytes (leak?)", rounds,
              before.arena, after.arena);
}

/* ---- contents across growth and shrinking ---- */

/* realloc p (holding `have` pattern bytes) to `size`; check the kept bytes
 * and the usable size, then fill up to size.  Returns the new pointer, or
 * NULL after reporting (p is then still valid and is freed here). */
static void *resize_checked(void *p, size_t have, size_t size, uintptr_t seed, const char *what)
{
    errno = 0;
    void *q = pcm_realloc(p, size);
    if (!q) {
        PCM_CHECK(q != NULL, "%s: realloc(%p, %zu) from %zu returned NULL (errno %d)", what, p,
                  size, have, errno);
        pcm_free(p);
        return NULL;
    }
    PCM_CHECK((uintptr_t)q % 16 == 0, "%s: realloc(%p, %zu) = %p: not 16-byte aligned", what, p,
              size, q);
    size_t usable = pcm_malloc_usable_size(q);
    PCM_CHECK(usable >= size, "%s: realloc(%p, %zu) = %p: usable %zu", what, p, size, q, usable);
    size_t kept = have < size ? have : size;
    size_t bad = first_mismatch(q, kept, seed);
    PCM_CHECK(bad == SIZE_MAX, "%s: realloc(%p, %zu) from %zu bytes = %p: byte %zu of %zu lost",
              what, p, size, have, q, bad, kept);
    /* The whole usable size is writable; the pattern goes up to size. */
    fill_range(q, kept, usable, seed);
    return q;
}

PCM_TEST(realloc_keeps_contents_across_every_class)
{
    /* Up through every class boundary (size - 1, size, size + 1) into the
     * large range, then back down the same way. */
    size_t sizes[3 * PCM_CLASS_COUNT];
    size_t n = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        size_t s = pcm_class_size(c);
        sizes[n++] = s - 1;
        sizes[n++] = s;
        sizes[n++] = s + 1;
    }
    void *p = pcm_malloc(1);
    PCM_REQUIRE(p != NULL, "malloc(1) returned NULL");
    fill_range(p, 0, 1, 11);
    size_t have = 1;
    for (size_t i = 0; i < n && p; i++) {
        p = resize_checked(p, have, sizes[i], 11, "growing");
        have = sizes[i];
    }
    for (size_t i = n; i-- > 0 && p;) {
        p = resize_checked(p, have, sizes[i], 11, "shrinking");
        have = sizes[i];
    }
    pcm_free(p);
}

PCM_TEST(realloc_small_large_small)
{
    /* Each row a chain of sizes; every step checks the bytes it kept. */
    static const size_t chains[][6] = {
        {100, 300000, 5 * MIB, 200, 0, 0}, /* small, large, bigger, small */
        {PCM_SMALL_MAX, PCM_SMALL_MAX + 1, PCM_SMALL_MAX, PCM_SMALL_MAX - 1, 1, 0},
        {64 * MIB, MIB, 3 * MIB, 300000, 150000, 16}, /* shrinking by more than half */
        {300000, 200000, 100000, 40000, 300000, 0},   /* large shrunk in and out of place */
        {4 * MIB - 4096, 4 * MIB, 4 * MIB + 1, 8 * MIB + 17, 12 * MIB, 4097},
        {1, 17 * MIB, 16, 17 * MIB, 1, 0},
    };
    for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
        void *p = pcm_malloc(chains[c][0]);
        PCM_CHECK(p != NULL, "chain %zu: malloc(%zu) returned NULL", c, chains[c][0]);
        if (!p)
            continue;
        fill_range(p, 0, pcm_malloc_usable_size(p), c + 1);
        size_t have = chains[c][0];
        for (size_t i = 1; i < 6 && chains[c][i] && p; i++) {
            p = resize_checked(p, have, chains[c][i], c + 1, "chain");
            have = chains[c][i];
        }
        pcm_free(p);
    }
}

/* ---- how far growth rounds up ---- */

/* The usable size malloc gives a request of n bytes. */
static size_t usable_of_request(size_t n)
{
    void *q = pcm_malloc(n);
    size_t usable = q ? pcm_malloc_usable_size(q) : 0;
    pcm_free(q);
    return usable;
}

PCM_TEST(realloc_growth_below_1_kib_takes_the_new_size_class)
{
    /* Below 1 KiB growth takes the class of the new size, as malloc of
     * that size would; from 1 KiB on, twice the old size, and the appends
     * that then fit stay in place.  Appends of 8..64 bytes, as a string
     * builder makes, up to 8 KiB: from 1 KiB, 3 doublings at most. */
    unsigned moves_from_1_kib = 0;
    size_t have = 8;
    unsigned char *p = pcm_malloc(have);
    PCM_REQUIRE(p != NULL, "malloc(%zu) returned NULL", have);
    fill_range(p, 0, have, 7);
    for (size_t add = 8; have < 8192; add = add % 64 + 24) {
        size_t old_usable = pcm_malloc_usable_size(p), want = have + add;
        unsigned char *q = resize_checked(p, have, want, 7, "append");
        if (!q)
            return;
        size_t usable = pcm_malloc_usable_size(q);
        if (want <= old_usable)
            PCM_CHECK(q == p && usable == old_usable, "%zu -> %zu within usable %zu: moved to %p (usable %zu)",
                      have, want, old_usable, (void *)q, usable);
        else if (old_usable < 1024)
            PCM_CHECK(usable == usable_of_request(want), "%zu -> %zu from usable %zu: usable %zu, malloc(%zu) gets %zu",
                      have, want, old_usable, usable, want, usable_of_request(want));
        else if (want < 2 * old_usable)
            PCM_CHECK(usable >= 2 * old_usable, "%zu -> %zu from usable %zu: usable %zu, not at least twice", have,
                      want, old_usable, usable);
        moves_from_1_kib += old_usable >= 1024 && q != p;
        p = q;
        have = want;
    }
    PCM_CHECK(moves_from_1_kib <= 3, "appends from 1 KiB to 8 KiB moved the object %u times", moves_from_1_kib);
    pcm_free(p);
}

/* ---- amortised growth of a large object ---- */

/* Grow from `start` by `step` bytes `steps` times, filling what is added;
 * check everything at the end.  Returns how many times the pointer moved,
 * and in *usable_changes how many times the usable size changed (each
 * change is a system call or a copy). */
static unsigned grow_by_steps(size_t start, size_t step, unsigned steps, unsigned *usable_changes,
                              unsigned *moves_while_large)
{
    *usable_changes = 0;
    *moves_while_large = 0;
    unsigned char *p = pcm_malloc(start);
    if (!p) {
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", start);
        return 0;
    }
    fill_range(p, 0, start, 99);
    size_t size = start, usable = pcm_malloc_usable_size(p);
    unsigned moves = 0;
    for (unsigned i = 0; i < steps; i++) {
        size_t next = size + step;
        unsigned char *q = pcm_realloc(p, next);
        if (!q) {
            PCM_CHECK(q != NULL, "step %u: realloc(%p, %zu) returned NULL (errno %d)", i, (void *)p,
                      next, errno);
            pcm_free(p);
            return moves;
        }
        size_t now = pcm_malloc_usable_size(q);
        PCM_CHECK(now >= next, "step %u: realloc(%p, %zu) = %p: usable %zu", i, (void *)p, next,
                  (void *)q, now);
        if (q != p) {
            moves++;
            if (size > PCM_SMALL_MAX)
                (*moves_while_large)++;
        }
        *usable_changes += now != usable;
        /* Spot-check the bytes kept: the first, the last, a middle one. */
        PCM_CHECK(q[0] == pattern_byte(0, 99) && q[size - 1] == pattern_byte(size - 1, 99) &&
                      q[size / 2] == pattern_byte(size / 2, 99),
                  "step %u: realloc(%p, %zu) = %p lost bytes of the old %zu", i, (void *)p, next,
                  (void *)q, size);
        fill_range(q, size, next, 99);
        p = q;
        size = next;
        usable = now;
    }
    size_t bad = first_mismatch(p, size, 99);
    PCM_CHECK(bad == SIZE_MAX, "grown from %zu by %zu x %u to %zu at %p: byte %zu lost", start,
              step, steps, size, (void *)p, bad);
    pcm_free(p);
    return moves;
}

PCM_TEST(realloc_growth_by_pages_is_amortised)
{
    /* 4097 -> 4097 + 350 * 4096 (about 1.4 MiB), 4 KiB at a time.  While
     * the object is small each class change moves it: at most one move per
     * class crossed (about 35 here).  Once large, growth must be
     * geometric: O(log) remaps, not 350. */
    unsigned changes, large_moves;
    unsigned moves = grow_by_steps(4097, 4096, 350, &changes, &large_moves);
    PCM_CHECK(moves < 40, "4097 + 350 x 4096: the pointer changed %u times (%u while large)", moves,
              large_moves);
    PCM_CHECK(large_moves <= 12, "4097 + 350 x 4096: %u moves while large", large_moves);
    PCM_CHECK(changes < 60, "4097 + 350 x 4096: usable size changed %u times", changes);

    /* Entirely in the large range: 350 steps from 256 KiB + 1 to about
     * 1.6 MiB is a factor of 6.5: log base 1.25 of it is 8.4 growths. */
    moves = grow_by_steps(PCM_SMALL_MAX + 1, 4096, 350, &changes, &large_moves);
    PCM_CHECK(changes <= 12, "large 256 KiB + 1 + 350 x 4096: usable size changed %u times",
              changes);
    PCM_CHECK(moves <= 12, "large 256 KiB + 1 + 350 x 4096: the pointer changed %u times", moves);

    /* Byte-at-a-time growth of a large object: 20000 reallocs, few remaps. */
    moves = grow_by_steps(MIB, 1, (unsigned)pcm_test_scale(20000), &changes, &large_moves);
    PCM_CHECK(changes <= 2, "1 MiB + 20000 x 1 byte: usable size changed %u times", changes);
}

/* ---- errno: a success leaves it as it was ---- */

/* Map a page at the end of p's mapping (p + its usable size, where a
 * large object's mapping ends), so that the mapping cannot grow in place;
 * NULL if something is there already (then it cannot either). */
static void *block_growth_of(void *p)
{
    char *end = (char *)p + pcm_malloc_usable_size(p);
    void *page = mmap(end, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return NULL;
    if (page != end) {
        munmap(page, 4096);
        return NULL;
    }
    return page;
}

/* The mapping cannot grow in place (the kernel says ENOMEM) and moves:
 * a success, which must not leave that ENOMEM behind. */
PCM_TEST(realloc_that_moves_a_large_object_keeps_errno)
{
    char *p = pcm_malloc(MIB);
    PCM_REQUIRE(p != NULL, "malloc(1 MiB) returned NULL");
    fill_range(p, 0, MIB, 3);
    void *blocker = block_growth_of(p);
    errno = 1234;
    char *q = pcm_realloc(p, 4 * MIB);
    int err = errno;
    PCM_CHECK(q != NULL, "realloc(%p, 4 MiB) returned NULL (errno %d)", (void *)p, err);
    PCM_CHECK(err == 1234, "realloc(%p, 4 MiB) = %p, a success, changed errno to %d", (void *)p, (void *)q, err);
    if (q) {
        size_t bad = first_mismatch(q, MIB, 3);
        PCM_CHECK(bad == SIZE_MAX, "realloc to 4 MiB = %p: byte %zu changed", (void *)q, bad);
    }
    pcm_free(q ? q : p);
    if (blocker)
        munmap(blocker, 4096);
}

/* malloc takes the only cached mapping, smaller than it needs, and grows
 * it: by a move, when it cannot grow in place. */
PCM_TEST(malloc_that_grows_a_cached_mapping_keeps_errno)
{
    pcm_malloc_trim(0); /* the cache empty: the 1 MiB mapping below is all it holds */
    char *p = pcm_malloc(MIB);
    PCM_REQUIRE(p != NULL, "malloc(1 MiB) returned NULL");
    void *blocker = block_growth_of(p);
    pcm_free(p);
    errno = 1234;
    char *q = pcm_malloc(3 * MIB);
    int err = errno;
    PCM_CHECK(q != NULL, "malloc(3 MiB) returned NULL (errno %d)", err);
    PCM_CHECK(err == 1234, "malloc(3 MiB) = %p, a success, changed errno to %d", (void *)q, err);
    if (q)
        memset(q, 1, 3 * MIB);
    pcm_free(q);
    if (blocker)
        munmap(blocker, 4096);
}

/* ---- failures leave the old object intact ---- */

static void check_failure_keeps(size_t old_size, size_t count, size_t elem, bool array)
{
    void *p = pcm_malloc(old_size);
    PCM_REQUIRE(p != NULL, "malloc(%zu) returned NULL", old_size);
    size_t usable = pcm_malloc_usable_size(p);
    fill_range(p, 0, usable, 5);
    errno = 0;
    void *q = array ? pcm_reallocarray(p, count, elem) : pcm_realloc(p, count);
    int err = errno;
    if (array)
        PCM_CHECK(q == NULL && err == ENOMEM,
                  "reallocarray(%p [%zu bytes], %zu, %zu) = %p errno %d, expected NULL + ENOMEM", p,
                  old_size, count, elem, q, err);
    else
        PCM_CHECK(q == NULL && err == ENOMEM,
                  "realloc(%p [%zu bytes], %zu) = %p errno %d, expected NULL + ENOMEM", p, old_size,
                  count, q, err);
    if (q) {
        pcm_free(q);
        return;
    }
    PCM_CHECK(pcm_malloc_usable_size(p) == usable, "failed resize of %p changed usable %zu -> %zu",
              p, usable, pcm_malloc_usable_size(p));
    size_t bad = first_mismatch(p, usable, 5);
    PCM_CHECK(bad == SIZE_MAX, "failed resize of %p (%zu bytes, to %zu x %zu): byte %zu changed", p,
              old_size, count, elem, bad);
    /* Still a live object: it can grow for real, then be freed. */
    void *r = pcm_realloc(p, old_size + 100);
    PCM_CHECK(r != NULL, "realloc(%p, %zu) after a failure returned NULL", p, old_size + 100);
    if (r) {
        bad = first_mismatch(r, usable < old_size + 100 ? usable : old_size + 100, 5);
        PCM_CHECK(bad == SIZE_MAX, "realloc after a failure = %p: byte %zu changed", r, bad);
    }
    pcm_free(r ? r : p);
}

PCM_TEST(realloc_failure_keeps_the_old_object)
{
    static const size_t olds[] = {1, 100, 5000, PCM_SMALL_MAX, PCM_SMALL_MAX + 1, MIB, 5 * MIB};
    const size_t impossible[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4096, SIZE_MAX - 4 * MIB,
                                 SIZE_MAX - 8 * MIB};
    for (size_t i = 0; i < sizeof olds / sizeof olds[0]; i++)
        for (size_t j = 0; j < sizeof impossible / sizeof impossible[0]; j++)
            check_failure_keeps(olds[i], impossible[j], 1, false);
    /* An object may not exceed PTRDIFF_MAX (glibc refuses such requests):
     * pointer differences inside it would overflow.  On a 32-bit process
     * 2 GiB of address space is often free, so only a size check stops
     * these.  Few cases: under qemu-i386 each attempt to grow a large
     * mapping to 2 GiB costs seconds of emulated mremap. */
    check_failure_keeps(100, SIZE_MAX / 2 + 1, 1, false);
    check_failure_keeps(100, (size_t)PTRDIFF_MAX, 1, false);
    check_failure_keeps(PCM_SMALL_MAX + 1, SIZE_MAX / 2 + 1, 1, false);
}

#if UINTPTR_MAX > 0xffffffffu
/* VmSize of this process in KiB, read without malloc; 0 if unknown. */
static unsigned long vm_size_kib(void)
{
    char buf[4096];
    pcm_test_read_file("/proc/self/status", buf, sizeof buf);
    const char *v = strstr(buf, "VmSize:");
    if (!v)
        return 0;
    return strtoul(v + 7, NULL, 10);
}

/* A request no address space can hold fails without leaving anything
 * mapped behind.  (64-bit only: there the segment map's leaves are mapped
 * on demand; a 32-bit build's map is one static array.) */
PCM_TEST(realloc_failure_maps_nothing)
{
    /* Below PTRDIFF_MAX, above any user address space (47 or 48 bits). */
    const size_t sizes[] = {(size_t)1 << 48, SIZE_MAX / 4};
    static const size_t olds[] = {100, PCM_SMALL_MAX + 1};
    for (size_t i = 0; i < sizeof olds / sizeof olds[0]; i++) {
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            void *p = pcm_malloc(olds[i]);
            PCM_REQUIRE(p != NULL, "malloc(%zu) returned NULL", olds[i]);
            unsigned long before = vm_size_kib();
            uint64_t start = pcm_test_clock_ns();
            errno = 0;
            void *q = pcm_realloc(p, sizes[j]);
            int err = errno;
            unsigned long ms = (unsigned long)((pcm_test_clock_ns() - start) / 1000000);
            unsigned long after = vm_size_kib();
            PCM_CHECK(q == NULL && err == ENOMEM, "realloc(%p [%zu bytes], %zu) = %p errno %d", p,
                      olds[i], sizes[j], q, err);
            /* 16 MiB of slack: nothing else in this thread maps memory. */
            PCM_CHECK(
                after <= before + 16 * 1024,
                "failed realloc(%p [%zu bytes], %zu) left VmSize %lu -> %lu KiB (took %lu ms)", p,
                olds[i], sizes[j], before, after, ms);
            pcm_free(q ? q : p);
        }
    }
}
#endif

PCM_TEST(reallocarray_overflow_keeps_the_old_object)
{
    const size_t half_bits = (size_t)1 << (sizeof(size_t) * 4);
    const size_t pairs[][2] = {
        {SIZE_MAX, 2},          {2, SIZE_MAX},         {SIZE_MAX / 2 + 1, 2},
        {half_bits, half_bits}, {SIZE_MAX / 8 + 1, 8},
    };
    static const size_t olds[] = {1, 100, PCM_SMALL_MAX + 1, 2 * MIB};
    for (size_t i = 0; i < sizeof olds / sizeof olds[0]; i++)
        for (size_t j = 0; j < sizeof pairs / sizeof pairs[0]; j++)
            check_failure_keeps(olds[i], pairs[j][0], pairs[j][1], true);

    /* Without overflow it is realloc(p, count * size). */
    unsigned char *p = pcm_reallocarray(NULL, 100, 3);
    PCM_REQUIRE(p != NULL, "reallocarray(NULL, 100, 3) returned NULL");
    fill_range(p, 0, 300, 3);
    unsigned char *q = pcm_reallocarray(p, 1000, 300);
    PCM_REQUIRE(q != NULL, "reallocarray(%p, 1000, 300) returned NULL", (void *)p);
    PCM_CHECK(pcm_malloc_usable_size(q) >= 300000, "reallocarray(%p, 1000, 300) = %p: usable %zu",
              (void *)p, (void *)q, pcm_malloc_usable_size(q));
    size_t bad = first_mismatch(q, 300, 3);
    PCM_CHECK(bad == SIZE_MAX, "reallocarray(%p, 1000, 300) = %p: byte %zu lost", (void *)p,
              (void *)q, bad);
    q[299999] = 1;
    pcm_free(q);
}
