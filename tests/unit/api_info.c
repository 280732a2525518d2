/*
 * tests/unit/api_info.c - conformance of the C23 sized free and of the
 * information and control calls: pcm_free_sized (small and large
 * objects, after realloc), pcm_mallinfo2 / pcm_mallinfo (fields
 * consistent, following what is allocated and freed), pcm_malloc_trim,
 * pcm_mallopt and pcm_malloc_stats (a report on stderr).
 * Uses the C library (errno, malloc.h, dup2, tmpfile): libc platform only.
 */
#include "api_pattern.h"
#include "harness.h"

#include "pcmalloc.h"
#include "sizeclass.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ---- free_sized ---- */

/* free_sized(p, size) of an object allocated with `size` bytes.  A size
 * pcmalloc took for a mismatch would abort the binary: the test fails. */
static void free_sized_checked(void *p, size_t size, const char *how)
{
    errno = 1234;
    pcm_free_sized(p, size);
    PCM_CHECK(errno == 1234, "free_sized(%p, %zu) [%s] changed errno to %d", p, size, how, errno);
}

PCM_TEST(free_sized_small_and_large)
{
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        size_t s = pcm_class_size(c);
        const size_t sizes[] = {s - 1, s, s + 1};
        for (size_t i = 0; i < 3; i++) {
            void *p = pcm_malloc(sizes[i]);
            PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", sizes[i]);
            if (!p)
                continue;
            memset(p, 0x21, sizes[i]);
            free_sized_checked(p, sizes[i], "malloc");
        }
    }
    static const size_t large[] = {PCM_SMALL_MAX + 1, 300000, MIB, 4 * MIB + 3, 64 * MIB};
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) {
        void *p = pcm_malloc(large[i]);
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", large[i]);
        if (!p)
            continue;
        memset(p, 0x21, large[i]);
        free_sized_checked(p, large[i], "malloc");
    }
    void *z = pcm_malloc(0);
    PCM_CHECK(z != NULL, "malloc(0) returned NULL");
    free_sized_checked(z, 0, "malloc(0)");
    void *c = pcm_calloc(10, 30);
    PCM_CHECK(c != NULL, "calloc(10, 30) returned NULL");
    free_sized_checked(c, 300, "calloc(10, 30)");
    c = pcm_calloc(1000, 1000);
    PCM_CHECK(c != NULL, "calloc(1000, 1000) returned NULL");
    free_sized_checked(c, 1000000, "calloc(1000, 1000)");
    free_sized_checked(NULL, 100, "NULL");
}

PCM_TEST(free_sized_after_realloc)
{
    /* {first size, realloc'ed size}: free_sized gets the second. */
    static const size_t steps[][2] = {
        {100, 5000},
        {5000, 100},
        {100, 110},
        {128, 120},
        {100, 300000},
        {300000, 100},
        {300000, PCM_SMALL_MAX}, /* large kept in place */
        {300000, 200000},
        {4 * MIB, 3 * MIB},
        {4 * MIB, MIB}, /* shrunk mappings */
        {MIB, 9 * MIB},
        {PCM_SMALL_MAX, PCM_SMALL_MAX + 1},
        {PCM_SMALL_MAX + 1, PCM_SMALL_MAX},
        {64 * MIB, 1},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        void *p = pcm_malloc(steps[i][0]);
        PCM_CHECK(p != NULL, "malloc(%zu) returned NULL", steps[i][0]);
        if (!p)
            continue;
        void *q = pcm_realloc(p, steps[i][1]);
        PCM_CHECK(q != NULL, "realloc(%p, %zu) returned NULL", p, steps[i][1]);
        if (!q) {
            pcm_free(p);
            continue;
        }
        memset(q, 0x43, steps[i][1]);
        char how[64];
        snprintf(how, sizeof how, "malloc(%zu) then realloc", steps[i][0]);
        free_sized_checked(q, steps[i][1], how);
    }
}

/* free_sized frees: a loop that would leak 200 MB maps little. */
PCM_TEST(free_sized_releases_memory)
{
    struct mallinfo2 before = pcm_mallinfo2();
    unsigned long rounds = pcm_test_scale(200000);
    for (unsigned long i = 0; i < rounds; i++) {
        void *p = pcm_malloc(1000);
        PCM_REQUIRE(p != NULL, "malloc(1000) #%lu returned NULL", i);
        pcm_free_sized(p, 1000);
    }
    struct mallinfo2 after = pcm_mallinfo2();
    PCM_CHECK(after.arena <= before.arena + 4 * MIB,
              "%lu x (malloc(1000), free_sized): segments grew %zu -> %zu bytes (leak?)", rounds,
              before.arena, after.arena);
    void *big = pcm_malloc(64 * MIB);
    PCM_REQUIRE(big != NULL, "malloc(64 MiB) returned NULL");
    struct mallinfo2 during = pcm_mallinfo2();
    pcm_free_sized(big, 64 * MIB);
    after = pcm_mallinfo2();
    PCM_CHECK(after.hblkhd + 64 * MIB <= during.hblkhd,
              "free_sized(%p, 64 MiB) did not release it: hblkhd %zu -> %zu", big, during.hblkhd,
              after.hblkhd);
}

/* ---- mallinfo2 / mallinfo ---- */

static void print_info(const char *when, struct mallinfo2 m)
{
    pcm_test_printf("  %s: arena %zu hblks %zu hblkhd %zu uordblks %zu fordblks %zu usmblks %zu\n",
                    when, m.arena, m.hblks, m.hblkhd, m.uordblks, m.fordblks, m.usmblks);
}

/* The fields' relations, as include/pcmalloc.h defines them: segments
 * (arena) plus large mappings (hblkhd) are everything mapped, which is
 * what is handed out (uordblks) plus what is free (fordblks); the peak
 * (usmblks) is at least that. */
static bool info_consistent(const char *when, struct mallinfo2 m)
{
    bool ok = true;
    if (m.arena + m.hblkhd != m.uordblks + m.fordblks) {
        PCM_CHECK(m.arena + m.hblkhd == m.uordblks + m.fordblks,
                  "%s: arena + hblkhd = %zu, uordblks + fordblks = %zu", when, m.arena + m.hblkhd,
                  m.uordblks + m.fordblks);
        ok = false;
    }
    if (m.usmblks < m.arena + m.hblkhd) {
        PCM_CHECK(m.usmblks >= m.arena + m.hblkhd, "%s: peak usmblks %zu below mapped %zu", when,
                  m.usmblks, m.arena + m.hblkhd);
        ok = false;
    }
    if (!ok)
        print_info(when, m);
    return ok;
}

PCM_TEST(mallinfo2_follows_small_objects)
{
    enum { OBJECT = 1024, COUNT = 10 * 1024 }; /* 10 MiB */
    static void *ptrs[COUNT];
    struct mallinfo2 before = pcm_mallinfo2();
    info_consistent("before", before);
    for (size_t i = 0; i < COUNT; i++) {
        ptrs[i] = pcm_malloc(OBJECT);
        PCM_REQUIRE(ptrs[i] != NULL, "malloc(%d) #%zu returned NULL", OBJECT, i);
        memset(ptrs[i], 1, OBJECT);
    }
    struct mallinfo2 full = pcm_mallinfo2();
    info_consistent("10 MiB allocated", full);
    /* Objects that were already in a per-CPU cache count as handed out
     * before they are taken: allow a little. */
    PCM_CHECK(full.uordblks >= before.uordblks + (size_t)COUNT * OBJECT - MIB,
              "10 MiB in 1 KiB objects: uordblks %zu -> %zu", before.uordblks, full.uordblks);
    PCM_CHECK(full.arena >= (size_t)COUNT * OBJECT, "10 MiB in 1 KiB objects: arena %zu",
              full.arena);
    for (size_t i = 0; i < COUNT; i++)
        pcm_free(ptrs[i]);
    struct mallinfo2 freed = pcm_mallinfo2();
    info_consistent("10 MiB freed", freed);
    /* Caches may keep some freed objects (and count them as handed out),
     * but most of the 10 MiB must come back. */
    PCM_CHECK(freed.uordblks < full.uordblks, "uordblks did not fall after free: %zu -> %zu",
              full.uordblks, freed.uordblks);
    PCM_CHECK(freed.uordblks <= before.uordblks + 2 * MIB,
              "uordblks %zu before, %zu with 10 MiB, %zu after freeing them all", before.uordblks,
              full.uordblks, freed.uordblks);
}

PCM_TEST(mallinfo2_follows_large_objects)
{
    /* 64 MiB: too big for the cache of freed mappings, so free unmaps it.
     * The cache emptied first: a malloc may grow a cached mapping. */
    pcm_malloc_trim(0);
    struct mallinfo2 before = pcm_mallinfo2();
    info_consistent("before", before);
    void *p = pcm_malloc(64 * MIB);
    PCM_REQUIRE(p != NULL, "malloc(64 MiB) returned NULL");
    struct mallinfo2 during = pcm_mallinfo2();
    info_consistent("64 MiB allocated", during);
    PCM_CHECK(during.hblkhd >= before.hblkhd + 64 * MIB, "hblkhd %zu -> %zu for 64 MiB",
              before.hblkhd, during.hblkhd);
    PCM_CHECK(during.uordblks >= before.uordblks + 64 * MIB, "uordblks %zu -> %zu for 64 MiB",
              before.uordblks, during.uordblks);
    /* glibc: hblks is the number of mmapped blocks now in use. */
    PCM_CHECK(during.hblks == before.hblks + 1, "hblks %zu -> %zu for one large object",
              before.hblks, during.hblks);
    pcm_free(p);
    struct mallinfo2 after = pcm_mallinfo2();
    info_consistent("64 MiB freed", after);
    PCM_CHECK(after.hblkhd == before.hblkhd, "hblkhd %zu before, %zu after malloc + free of 64 MiB",
              before.hblkhd, after.hblkhd);
    PCM_CHECK(after.uordblks == before.uordblks,
              "uordblks %zu before, %zu after malloc + free of 64 MiB", before.uordblks,
              after.uordblks);
    PCM_CHECK(after.hblks == before.hblks,
              "hblks %zu before, %zu after malloc + free of one large object", before.hblks,
              after.hblks);

    /* Growing one object by realloc makes no new block. */
    p = pcm_malloc(MIB);
    PCM_REQUIRE(p != NULL, "malloc(1 MiB) returned NULL");
    struct mallinfo2 one = pcm_mallinfo2();
    for (size_t size = 2 * MIB; size <= 16 * MIB; size += MIB) {
        void *q = pcm_realloc(p, size);
        PCM_REQUIRE(q != NULL, "realloc(%p, %zu) returned NULL", p, size);
        p = q;
    }
    struct mallinfo2 grown = pcm_mallinfo2();
    info_consistent("one object grown to 16 MiB", grown);
    PCM_CHECK(grown.hblks == one.hblks, "realloc growth of one object: hblks %zu -> %zu", one.hblks,
              grown.hblks);
    PCM_CHECK(grown.hblkhd >= one.hblkhd + 15 * MIB, "realloc to 16 MiB: hblkhd %zu -> %zu",
              one.hblkhd, grown.hblkhd);
    pcm_free(p);
}

PCM_TEST(mallinfo_matches_mallinfo2)
{
    void *p = pcm_malloc(MIB), *q = pcm_malloc(1000);
    PCM_REQUIRE(p && q, "malloc returned NULL: %p %p", p, q);
    struct mallinfo2 wide = pcm_mallinfo2();
    struct mallinfo narrow = pcm_mallinfo();
    /* The old struct's int fields hold the same values (they wrap above
     * 2 GiB, which this process does not reach). */
    PCM_CHECK((size_t)narrow.arena == wide.arena, "arena %d vs %zu", narrow.arena, wide.arena);
    PCM_CHECK((size_t)narrow.hblks == wide.hblks, "hblks %d vs %zu", narrow.hblks, wide.hblks);
    PCM_CHECK((size_t)narrow.hblkhd == wide.hblkhd, "hblkhd %d vs %zu", narrow.hblkhd, wide.hblkhd);
    PCM_CHECK((size_t)narrow.uordblks == wide.uordblks, "uordblks %d vs %zu", narrow.uordblks,
              wide.uordblks);
    PCM_CHECK((size_t)narrow.fordblks == wide.fordblks, "fordblks %d vs %zu", narrow.fordblks,
              wide.fordblks);
    PCM_CHECK(wide.uordblks >= MIB + 1000, "uordblks %zu with 1 MiB + 1000 bytes live",
              wide.uordblks);
    pcm_free(p);
    pcm_free(q);
}

/* ---- malloc_trim, mallopt ---- */

PCM_TEST(malloc_trim_releases_and_allocation_goes_on)
{
    int rc = pcm_malloc_trim(0);
    PCM_CHECK(rc == 0 || rc == 1, "malloc_trim(0) = %d", rc);
    /* Freed large mappings wait in a cache; trim gives them back. */
    void *p = pcm_malloc(MIB), *q = pcm_malloc(3 * MIB);
    PCM_REQUIRE(p && q, "malloc returned NULL: %p %p", p, q);
    memset(p, 1, MIB);
    memset(q, 2, 3 * MIB);
    pcm_free(p);
    pcm_free(q);
    struct mallinfo2 before = pcm_mallinfo2();
    rc = pcm_malloc_trim(0);
    struct mallinfo2 after = pcm_mallinfo2();
    PCM_CHECK(rc == 1, "malloc_trim(0) after freeing 4 MiB of large objects = %d, expected 1", rc);
    PCM_CHECK(after.arena + after.hblkhd < before.arena + before.hblkhd,
              "malloc_trim(0) = %d: mapped bytes %zu -> %zu", rc, before.arena + before.hblkhd,
              after.arena + after.hblkhd);
    info_consistent("after trim", after);
    rc = pcm_malloc_trim(SIZE_MAX);
    PCM_CHECK(rc == 0 || rc == 1, "malloc_trim(SIZE_MAX) = %d", rc);

    /* Everything still works, small and large. */
    static const size_t sizes[] = {1, 100, 4096, PCM_SMALL_MAX, PCM_SMALL_MAX + 1, MIB, 20 * MIB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *r = pcm_malloc(sizes[i]);
        PCM_CHECK(r != NULL, "malloc(%zu) after malloc_trim returned NULL", sizes[i]);
        if (!r)
            continue;
        memset(r, 0x5f, pcm_malloc_usable_size(r));
        void *z = pcm_calloc(1, sizes[i]);
        PCM_CHECK(z != NULL, "calloc(1, %zu) after malloc_trim returned NULL", sizes[i]);
        if (z) {
            const unsigned char *b = z;
            size_t nonzero = 0;
            for (size_t k = 0; k < sizes[i]; k++)
                nonzero += b[k] != 0;
            PCM_CHECK(nonzero == 0, "calloc(1, %zu) after malloc_trim: %zu non-zero bytes",
                      sizes[i], nonzero);
        }
        pcm_free(r);
        pcm_free(z);
        rc = pcm_malloc_trim(0);
        PCM_CHECK(rc == 0 || rc == 1, "malloc_trim(0) = %d", rc);
    }
}

PCM_TEST(mallopt_accepts_everything)
{
    const int params[][2] = {
        {M_TRIM_THRESHOLD, 128 * 1024},
        {M_TOP_PAD, 0},
        {M_MMAP_THRESHOLD, 1 << 20},
        {M_MMAP_MAX, 0},
        {M_ARENA_MAX, 1},
        {M_ARENA_TEST, 8},
        {M_PERTURB, 0},
        {M_MXFAST, 0},
        {M_CHECK_ACTION, 3},
        {12345, -1},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        int rc = pcm_mallopt(params[i][0], params[i][1]);
        PCM_CHECK(rc == 1, "mallopt(%d, %d) = %d, expected 1", params[i][0], params[i][1], rc);
    }
    void *p = pcm_malloc(100);
    PCM_CHECK(p != NULL, "malloc(100) after mallopt returned NULL");
    pcm_free(p);
}

/* ---- malloc_stats ---- */

PCM_TEST(malloc_stats_reports_on_stderr)
{
    /* Something to report. */
    void *p = pcm_malloc(100), *q = pcm_malloc(MIB);
    PCM_REQUIRE(p && q, "malloc returned NULL: %p %p", p, q);

    FILE *capture = tmpfile();
    PCM_REQUIRE(capture != NULL, "tmpfile failed (errno %d)", errno);
    int saved = dup(2);
    PCM_REQUIRE(saved >= 0, "dup(2) failed (errno %d)", errno);
    PCM_REQUIRE(dup2(fileno(capture), 2) == 2, "dup2 onto fd 2 failed (errno %d)", errno);
    errno = 1234;
    pcm_malloc_stats();
    int err = errno;
    dup2(saved, 2);
    close(saved);

    static char text[64 * 1024];
    rewind(capture);
    size_t len = fread(text, 1, sizeof text - 1, capture);
    text[len] = 0;
    fclose(capture);
    PCM_CHECK(len > 0, "malloc_stats wrote nothing on stderr");
    char start[201];
    memcpy(start, text, sizeof start - 1); /* text is NUL-padded beyond len */
    start[sizeof start - 1] = 0;
    PCM_CHECK(strstr(text, "pcmalloc: statistics of pcmalloc ") != NULL,
              "malloc_stats report (%zu bytes) has no heading: %s", len, start);
    PCM_CHECK(err == 1234, "malloc_stats changed errno to %d", err);
    pcm_free(p);
    pcm_free(q);
}
