/*
 * tests/unit/segment_pool.c - empty segments go to the pool (src/segment_pool.c)
 * and serve any heap's next segment, or a large object when the OS has no
 * address space left.  Before the pool a segment was never given back: a
 * 32-bit process that had freed 2.7 GiB of small objects could not get
 * 1800 MiB (README, Limitations, before this change).
 */
#include "harness.h"
#include "address_limit.h"

#include "pcmalloc.h"

#include "layout.h"
#include "fast_path.h"
#include "os.h"
#include "segment_map.h"
#include "segment_pool.h"
#include "stats.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
/* Small objects of a big class: a few of them fill a segment. */
#define PHASE_SIZE ((size_t)200 * 1024)

static unsigned long segments_now(void)
{
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    return (unsigned long)t.segments;
}

/* Whether this build pools: known once pcmalloc is set up (the index is
 * mapped by the first allocation). */
static bool pooling(void)
{
    pcm_free(pcm_malloc(1));
    return pcm_segment_pool_enabled();
}

/* Whether empty segments must go back to the OS instead: on the rseq
 * path (asked of the path, not of pcm_segment_pool_unmaps, so that these
 * tests cannot skip themselves where the policy is wrong). */
static bool unmapping(void)
{
    return pooling() && pcm_fast_path_is_rseq();
}

/* Whether any page of [p, p + bytes) is mapped (mincore fails with ENOMEM
 * on a range with an unmapped page in it, so test page by page). */
static bool any_page_mapped(const void *p, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vec;
    for (size_t at = 0; at < bytes; at += page)
        if (mincore((char *)p + at, page, &vec) == 0 || errno != ENOMEM)
            return true;
    return false;
}

/* n objects of PHASE_SIZE, object i stamped i ^ mask; a failed malloc is
 * a failed check (its slot NULL). */
static void phase(uint32_t **objects, unsigned n, uint32_t mask, const char *when)
{
    for (unsigned i = 0; i < n; i++) {
        objects[i] = pcm_malloc(PHASE_SIZE);
        PCM_CHECK(objects[i] != NULL, "malloc(%zu) #%u failed %s", PHASE_SIZE, i, when);
        if (objects[i])
            objects[i][0] = i ^ mask;
    }
}

/* Check the stamps phase() wrote, and free the objects. */
static void check_and_free(uint32_t **objects, unsigned n, uint32_t mask)
{
    for (unsigned i = 0; i < n; i++) {
        if (objects[i] && objects[i][0] != (i ^ mask))
            PCM_CHECK(false, "object %u at %p: stamp %u", i, (void *)objects[i], objects[i][0]);
        pcm_free(objects[i]);
    }
}

/* The hardened build pools nothing (segment_pool.h): its segments stay
 * in their heaps, as before the pool. */
PCM_TEST(the_hardened_build_pools_nothing)
{
    if (pooling())
        return;
    void *p = pcm_malloc(PHASE_SIZE);
    pcm_free(p);
    pcm_malloc_trim(0);
    PCM_CHECK(pcm_segment_pool_count() == 0, "%zu chunks pooled", pcm_segment_pool_count());
}

PCM_TEST(empty_segments_go_to_the_pool_and_serve_again)
{
    if (!pooling() || unmapping())
        return; /* the_hardened_build_pools_nothing, empty_segments_go_back_to_the_os */
    enum { N = 120 }; /* 24 MiB of 200 KiB objects: several segments */
    static uint32_t *objects[N];
    phase(objects, N, 0, "");
    unsigned long before = segments_now();
    size_t pooled_before = pcm_segment_pool_count();
    check_and_free(objects, N, 0);
    pcm_malloc_trim(0);
    size_t pooled = pcm_segment_pool_count() - pooled_before;
    PCM_CHECK(pooled >= 4, "malloc_trim: %zu segments pooled (of %lu)", pooled, before);
    PCM_CHECK(segments_now() + pooled == before, "segments: %lu before, %lu after, %zu pooled", before,
              segments_now(), pooled);
    /* A pooled chunk: the index says so, the map names no one, the free
     * of a stale pointer into it is an invalid pointer (tests/misuse). */
    unsigned in_pool = 0;
    for (unsigned i = 0; i < N; i++)
        if (pcm_segment_index_kind(objects[i]) == PCM_INDEX_POOL) {
            in_pool++;
            PCM_CHECK(pcm_segment_map_find(objects[i]) == NULL, "object %u's pooled chunk: the map names %p", i,
                      pcm_segment_map_find(objects[i]));
            PCM_CHECK(objects[i][0] == 0, "object %u's pooled chunk reads %u, not zeroes", i, objects[i][0]);
        }
    PCM_CHECK(in_pool > 0, "none of the objects' chunks is in the pool");
    /* The same number again: from the pool's chunks (or room the heaps
     * had), with no new address space. */
    struct pcm_stats_totals trimmed, again_totals;
    pcm_stats_totals_read(&trimmed);
    static uint32_t *again[N];
    phase(again, N, ~0u, "after the trim");
    pcm_stats_totals_read(&again_totals);
    PCM_CHECK(again_totals.mapped_bytes <= trimmed.mapped_bytes, "mapped %lu KiB after the trim, %lu KiB after the "
              "second phase: new segments beside the pooled ones", (unsigned long)trimmed.mapped_bytes >> 10,
              (unsigned long)again_totals.mapped_bytes >> 10);
    PCM_CHECK(pcm_segment_pool_count() < pooled_before + pooled, "the pool kept all %zu chunks", pooled);
    check_and_free(again, N, ~0u);
}

/* The rseq path (segment_pool.h): an empty segment's chunk goes back to
 * the OS at a trim - out of the index and the map, not one page of it
 * mapped, the mapped bytes down by its size, the pool no bigger - and the
 * next phase maps segments afresh. */
PCM_TEST(empty_segments_go_back_to_the_os_on_the_rseq_path)
{
    if (!unmapping())
        return; /* the CAS path and the hardened build: the tests above */
    enum { N = 120 };
    static uint32_t *objects[N];
    pcm_malloc_trim(0); /* no large mapping cached from before: mapped_bytes is the segments' */
    phase(objects, N, 0, "");
    struct pcm_stats_totals before, after;
    pcm_stats_totals_read(&before);
    size_t pooled_before = pcm_segment_pool_count();
    check_and_free(objects, N, 0);
    pcm_malloc_trim(0);
    pcm_stats_totals_read(&after);
    unsigned long gone = (unsigned long)(after.unmapped_segments - before.unmapped_segments);
    PCM_CHECK(gone >= 4, "malloc_trim: %lu segments unmapped (of %lu)", gone, (unsigned long)before.segments);
    PCM_CHECK(after.segments + gone == before.segments, "segments: %lu before, %lu after, %lu unmapped",
              (unsigned long)before.segments, (unsigned long)after.segments, gone);
    PCM_CHECK(before.mapped_bytes - after.mapped_bytes == gone * PCM_SEGMENT_SIZE,
              "mapped %lu KiB before the trim, %lu KiB after it, for %lu segments unmapped",
              (unsigned long)before.mapped_bytes >> 10, (unsigned long)after.mapped_bytes >> 10, gone);
    PCM_CHECK(pcm_segment_pool_count() == pooled_before, "the pool went from %zu to %zu chunks", pooled_before,
              pcm_segment_pool_count());
    unsigned unmapped = 0;
    for (unsigned i = 0; i < N; i++) {
        char *chunk = (char *)((uintptr_t)objects[i] & ~(uintptr_t)(PCM_SEGMENT_SIZE - 1));
        if (pcm_segment_index_kind(chunk) != PCM_INDEX_NONE)
            continue;
        unmapped++;
        PCM_CHECK(pcm_segment_map_find(chunk) == NULL, "object %u's chunk: the map names %p", i,
                  pcm_segment_map_find(chunk));
        PCM_CHECK(!any_page_mapped(chunk, PCM_SEGMENT_SIZE), "object %u's chunk %p: a page is still mapped", i,
                  (void *)chunk);
    }
    PCM_CHECK(unmapped > 0, "none of the objects' chunks left the index");
    static uint32_t *again[N];
    phase(again, N, ~0u, "after the trim");
    check_and_free(again, N, ~0u);
}

/* Where the kernel will not give a chunk back (here: its decommit, the
 * unmap's first step, refused by fault injection), the chunk goes to the
 * pool instead, cleared: the fallback of the rseq path. */
PCM_TEST(a_segment_the_kernel_keeps_goes_to_the_pool)
{
    if (!unmapping())
        return;
    enum { N = 60 };
    static uint32_t *objects[N];
    phase(objects, N, 0, "");
    struct pcm_stats_totals before, after;
    pcm_stats_totals_read(&before);
    size_t pooled_before = pcm_segment_pool_count();
    check_and_free(objects, N, 0);
    pcm_os_fault_arm(PCM_OS_CALL_MADVISE, 1, true);
    pcm_malloc_trim(0);
    pcm_os_fault_disarm();
    pcm_stats_totals_read(&after);
    size_t pooled = pcm_segment_pool_count() - pooled_before;
    PCM_CHECK(after.unmapped_segments == before.unmapped_segments, "%lu segments unmapped with madvise refused",
              (unsigned long)(after.unmapped_segments - before.unmapped_segments));
    PCM_CHECK(pooled >= 2 && after.segments + pooled == before.segments, "segments: %lu before, %lu after, %zu pooled",
              (unsigned long)before.segments, (unsigned long)after.segments, pooled);
    for (unsigned i = 0; i < N; i++)
        if (pcm_segment_index_kind(objects[i]) == PCM_INDEX_POOL)
            PCM_CHECK(objects[i][0] == 0, "object %u's pooled chunk reads %u, not zeroes", i, objects[i][0]);
    /* The pool serves the next segments, as on the CAS path. */
    phase(objects, N, ~0u, "after the trim");
    PCM_CHECK(pcm_segment_pool_count() < pooled_before + pooled, "the pool kept all %zu chunks", pooled);
    check_and_free(objects, N, ~0u);
}

/* In a child (the address space limit is its own): small objects until
 * malloc says no, all freed and trimmed, then (arg non-NULL) a plain
 * mmap of 40% of what they took, then one block of that size, written and
 * read, then small objects again. */
static int big_block_after_small_phase(void *arg)
{
    /* 64-bit: 1 GiB above what the process has; 32-bit: what the machine
     * gives. */
    if (sizeof(void *) == 8 && !pcm_test_limit_address_space((size_t)1 << 30))
        return 10;
    enum { MAX = 1 << 15 };
    static uint32_t *objects[MAX];
    unsigned made = 0;
    for (; made < MAX; made++) {
        uint32_t *p = pcm_malloc(PHASE_SIZE);
        if (!p)
            break;
        p[0] = made;
        p[PHASE_SIZE / 4 - 1] = ~made;
        objects[made] = p;
    }
    if (made == MAX || made < 100)
        return 3; /* the address space did not run out, or ran out at once */
    for (unsigned i = 0; i < made; i++) {
        if (objects[i][0] != i || objects[i][PHASE_SIZE / 4 - 1] != ~i)
            return 4;
        pcm_free(objects[i]);
    }
    pcm_malloc_trim(0);
    size_t big = (size_t)made * PHASE_SIZE / 10 * 4;
    if (arg) { /* the address space is the program's again, not only malloc's */
        unsigned char *mapping = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mapping == MAP_FAILED)
            return 13;
        mapping[0] = 1;
        mapping[big - 1] = 2;
        munmap(mapping, big);
    }
    errno = 0;
    unsigned char *block = pcm_malloc(big);
    if (!block)
        return 5; /* the README's limitation: no address space for it */
    if (errno != 0)
        return 11; /* the failed mmap's ENOMEM leaked out of a success */
    for (size_t at = 0; at < big; at += MIB)
        block[at] = (unsigned char)(at / MIB);
    block[big - 1] = 0xa5;
    for (size_t at = 0; at < big; at += MIB)
        if (block[at] != (unsigned char)(at / MIB))
            return 6;
    if (block[big - 1] != 0xa5)
        return 6;
    /* It grows by copying (no address space to grow it in place or move
     * it), and keeps its contents. */
    errno = 0;
    unsigned char *bigger = pcm_realloc(block, big + MIB);
    if (bigger && errno != 0)
        return 12;
    if (bigger) {
        for (size_t at = 0; at < big; at += MIB)
            if (bigger[at] != (unsigned char)(at / MIB))
                return 7;
        block = bigger;
    }
    pcm_free(block);
    for (unsigned i = 0; i < 1000; i++) {
        objects[i] = pcm_malloc(64 + i);
        if (!objects[i])
            return 8;
        objects[i][0] = i;
    }
    for (unsigned i = 0; i < 1000; i++) {
        if (objects[i][0] != i)
            return 9;
        pcm_free(objects[i]);
    }
    return 0;
}

/* Run big_block_after_small_phase (with the plain mmap first, or not) and
 * say why it failed. */
static void phase_child(bool plain_mmap)
{
    static const char *const why[] = {
        "", "", "", "the address space did not run out (or at once)",
        "a small object lost its stamps", "malloc of 40% of the phase's bytes failed after the trim",
        "the big block lost its contents", "realloc lost the big block's contents",
        "a small object failed after the big block", "a small object lost its stamp", "",
        "malloc succeeded on pooled chunks but set errno", "realloc succeeded by copying but set errno",
        "a plain mmap of 40% of the phase's bytes failed after the trim",
    };
    static int yes;
    struct pcm_test_child child = pcm_test_run_child(big_block_after_small_phase, plain_mmap ? &yes : NULL, 120);
    if (child.ran && !child.signaled && child.exit_status == 10) {
        pcm_test_printf("    not here: RLIMIT_AS does not bind (qemu-user)\n");
        return;
    }
    PCM_CHECK(child.ran && !child.signaled && child.exit_status == 0, "child: %s (signal %d, status %d) %s",
              child.exit_status > 1 && child.exit_status < 14 ? why[child.exit_status] : "?", child.signal,
              child.exit_status, child.text);
}

PCM_TEST(a_big_block_fits_where_a_phase_of_small_objects_was)
{
    if (pooling())
        phase_child(false);
}

/* On the rseq path the phase's segments are unmapped: a mapping of the
 * program's own fits there too (on the CAS path the pool keeps them). */
PCM_TEST(a_plain_mmap_fits_where_a_phase_of_small_objects_was)
{
    if (unmapping())
        phase_child(true);
}

/* A run of pooled chunks too short for a large object is joined by free
 * address space beside it (a 32-bit process whose C library heap shrank
 * next to its segments).  Here: a run one chunk longer than any in the
 * pool, with the chunk below it unmapped; a take of one more chunk than
 * the run gets the run and the chunk below. */
PCM_TEST(a_run_grows_into_free_space_beside_it)
{
    if (!pooling())
        return;
    size_t run = pcm_segment_pool_count() + 1;
    char *base = pcm_os_map_aligned((run + 1) * PCM_SEGMENT_SIZE, PCM_SEGMENT_SIZE);
    PCM_REQUIRE(base != NULL, "cannot map %zu chunks", run + 1);
    pcm_os_unmap(base, PCM_SEGMENT_SIZE);
    pcm_segment_pool_put(base + PCM_SEGMENT_SIZE, run, true);
    char *taken = pcm_segment_pool_take(run + 1);
    PCM_CHECK(taken == base, "took %p, not the run at %p and the chunk below it", (void *)taken,
              (void *)(base + PCM_SEGMENT_SIZE));
    if (taken != base)
        return;
    for (size_t i = 0; i <= run; i++) {
        PCM_CHECK(pcm_segment_index_kind(base + i * PCM_SEGMENT_SIZE) == PCM_INDEX_NONE, "chunk %zu: index %d", i,
                  (int)pcm_segment_index_kind(base + i * PCM_SEGMENT_SIZE));
        base[i * PCM_SEGMENT_SIZE] = 1; /* mapped, writable */
    }
    pcm_segment_pool_put(base, run + 1, false);
    PCM_CHECK(pcm_segment_pool_count() >= run + 1, "%zu chunks pooled after giving back %zu", pcm_segment_pool_count(),
              run + 1);
}
