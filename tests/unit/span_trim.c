/*
 * tests/unit/span_trim.c - malloc_trim's decommit of the free pages inside
 * spans that still hold objects (src/span_trim.c).
 *
 * Spans that this test filled whole, so that it knows every object in them,
 * keep one object on one or two pages each; the rest is freed and
 * malloc_trim(0) runs.  Objects of 64 bytes (4 pages of 64 objects) and of
 * 48 (341 in 4 pages: some lie across two pages).  Checked:
 *   - the pages no kept object touches are not resident (mincore), the
 *     others are, every kept byte is intact, the kept objects are the span's
 *     only ones out (used) and its free list holds exactly the free objects
 *     touching no page given back: the others were set aside;
 *   - objects allocated next overlap nothing and keep their bytes, none
 *     touches a page given back while its span holds a kept object, and the
 *     free objects left on the kept pages are handed out again;
 *   - once the kept objects are freed, the next trim gives those spans back
 *     whole, and objects are cut on their pages again, intact.
 * Why: a set-aside object handed out again would be read for a link from a
 * zeroed page, or be handed out twice; a span that never comes back whole
 * keeps its pages for good.
 *
 * Each run pins the thread to its CPU (malloc_trim's cache flush moves it
 * around, and the reuse would then happen in another heap); where pinning
 * fails, the checks that the trimmed spans were reused are skipped.  The
 * residency checks need pages of PCM_PAGE_SIZE and a mincore that sees
 * MADV_DONTNEED (qemu-user may not): otherwise they are skipped, said so.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "hardening.h"
#include "layout.h"
#include "segment.h"
#include "segment_map.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define OBJECTS 8192u            /* 24 to 32 spans' worth */
#define MAX_SPANS (OBJECTS / 64) /* spans of 64 objects or more */

static const size_t sizes[] = {64, 48};
static size_t size; /* of this run's objects */
static unsigned char *objects[2 * OBJECTS + 2 * MAX_SPANS], *kept[2 * MAX_SPANS];
static uintptr_t span_page[MAX_SPANS], gone[4 * MAX_SPANS], kept_pages[4 * MAX_SPANS]; /* page numbers */
static unsigned span_mask[MAX_SPANS], span_free[MAX_SPANS]; /* pages kept; free objects on them */
static size_t span_count, kept_count, gone_count, kept_page_count, free_count;
static bool pinned;
static cpu_set_t saved_affinity;

static unsigned char pattern(const unsigned char *p, size_t b)
{
    return (unsigned char)(((uintptr_t)p / 16 * 167 + b * 31 + 13) | 1); /* never 0 */
}

static unsigned char *filled(unsigned char *p)
{
    for (size_t b = 0; p && b < size; b++)
        p[b] = pattern(p, b);
    PCM_CHECK(p, "malloc(%zu) failed", size);
    return p;
}

static void check_intact(unsigned char **p, size_t n, const char *what)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < size; b++)
            if (p[i][b] != pattern(p[i], b)) {
                bad++;
                break;
            }
    PCM_CHECK(bad == 0, "%zu-byte objects %s: %zu of %zu overwritten", size, what, bad, n);
}

static int by_value(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static bool listed(const uintptr_t *sorted, size_t n, uintptr_t value)
{
    return bsearch(&value, sorted, n, sizeof value, by_value) != NULL;
}

/* The first and the last page of object p. */
static uintptr_t first_page(const void *p)
{
    return (uintptr_t)p >> PCM_PAGE_SHIFT;
}

static uintptr_t last_page(const void *p)
{
    return ((uintptr_t)p + size - 1) >> PCM_PAGE_SHIFT;
}

/* Whether object p lies on kept pages only; on a page given back. */
static bool on_kept_pages(const void *p)
{
    return listed(kept_pages, kept_page_count, first_page(p)) && listed(kept_pages, kept_page_count, last_page(p));
}

static bool on_gone_page(const void *p)
{
    return listed(gone, gone_count, first_page(p)) || listed(gone, gone_count, last_page(p));
}

/* Sorts p[0..n) by address; whether no two of them overlap. */
static bool disjoint(unsigned char **p, size_t n, const char *what)
{
    qsort(p, n, sizeof *p, by_value);
    for (size_t i = 1; i < n; i++)
        if ((uintptr_t)p[i - 1] + size > (uintptr_t)p[i]) {
            PCM_CHECK(0, "%s: objects %p and %p overlap", what, (void *)p[i - 1], (void *)p[i]);
            return false;
        }
    return true;
}

static bool residency_visible(void)
{
    unsigned char vec = 0, *p = MAP_FAILED;
    if ((size_t)sysconf(_SC_PAGESIZE) == PCM_PAGE_SIZE)
        p = mmap(NULL, PCM_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
        p[0] = 1;
    bool seen = p != MAP_FAILED && mincore(p, PCM_PAGE_SIZE, &vec) == 0 && (vec & 1) &&
                madvise(p, PCM_PAGE_SIZE, MADV_DONTNEED) == 0 && mincore(p, PCM_PAGE_SIZE, &vec) == 0 && !(vec & 1);
    if (p != MAP_FAILED)
        munmap(p, PCM_PAGE_SIZE);
    if (!seen)
        pcm_test_printf("  pages not of %zu bytes or MADV_DONTNEED unseen: residency not checked\n", PCM_PAGE_SIZE);
    return seen;
}

/* Pin; fill whole spans of `object_size`-byte objects, keep one on one or
 * two pages of each, free the rest, trim.  False when too few spans were
 * filled by this test alone (a failure). */
static void pin(void)
{
    int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    pinned = cpu >= 0 && sched_getaffinity(0, sizeof saved_affinity, &saved_affinity) == 0 &&
             sched_setaffinity(0, sizeof one, &one) == 0;
}

static void unpin(void)
{
    if (pinned)
        sched_setaffinity(0, sizeof saved_affinity, &saved_affinity);
}

static bool setup(size_t object_size)
{
    pin();
    size = object_size;
    pcm_malloc_trim(0);
    span_count = kept_count = gone_count = kept_page_count = free_count = 0;
    for (size_t i = 0; i < OBJECTS; i++)
        if (!(objects[i] = filled(pcm_malloc(size))))
            return false;
    qsort(objects, OBJECTS, sizeof *objects, by_value);
    for (size_t i = 0, n; i < OBJECTS; i += n) {
        struct pcm_span *span = pcm_span_of(pcm_segment_of(objects[i]), objects[i]);
        for (n = 1; i + n < OBJECTS && pcm_span_of(pcm_segment_of(objects[i + n]), objects[i + n]) == span; n++)
            ;
        /* All objects of the span ours (so all carved), in address order:
         * object k is objects[i + k]. */
        if (n != pcm_span_capacity(span) || span->object_size != size || span->pages > 8)
            continue;
        size_t j = span_count++, per_page = PCM_PAGE_SIZE / size;
        unsigned chosen = 1u << (j % span->pages) | (j % 3 == 0 ? 1u << ((j + 2) % span->pages) : 0), mask = 0;
        uintptr_t page0 = span_page[j] = first_page((void *)span->start);
        for (unsigned q = 0; q < span->pages; q++) {
            /* One span in four: the last object starting on the page,
             * which lies across two if the size does not divide a page. */
            size_t k = j % 4 == 1 ? ((q + 1) * PCM_PAGE_SIZE - 1) / size
                                  : (q * PCM_PAGE_SIZE + size - 1) / size + (j * 7 + q * 13) % (per_page - 1);
            if (!(chosen >> q & 1))
                continue;
            unsigned char **keep = &objects[i + (k < n ? k : n - 1)];
            mask |= 1u << (first_page(*keep) - page0) | 1u << (last_page(*keep) - page0);
            kept[kept_count++] = *keep;
            *keep = NULL;
        }
        for (unsigned q = 0; q < span->pages; q++)
            if (mask >> q & 1)
                kept_pages[kept_page_count++] = page0 + q;
            else
                gone[gone_count++] = page0 + q;
        span_mask[j] = mask;
        span_free[j] = 0;
        for (size_t k = 0; k < n; k++)
            span_free[j] += objects[i + k] && on_kept_pages(objects[i + k]);
        free_count += span_free[j];
    }
    for (size_t i = 0; i < OBJECTS; i++)
        pcm_free(objects[i]);
    pcm_malloc_trim(0);
    PCM_CHECK(span_count * 4 * PCM_PAGE_SIZE >= OBJECTS * size / 2, "%zu-byte objects: only %zu spans were filled by "
              "this test alone", size, span_count);
    return span_count * 4 * PCM_PAGE_SIZE >= OBJECTS * size / 2;
}

static void teardown(void)
{
    for (size_t k = 0; k < kept_count; k++)
        pcm_free(kept[k]);
    kept_count = 0;
    pcm_malloc_trim(0);
    unpin();
}

PCM_TEST(span_trim_gives_back_the_pages_no_kept_object_touches)
{
    bool visible = residency_visible();
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; teardown(), z++) {
        if (!setup(sizes[z]))
            continue;
        for (size_t j = 0; j < span_count; j++) {
            unsigned char vec[8];
            void *start = (void *)(span_page[j] << PCM_PAGE_SHIFT);
            struct pcm_span *span = pcm_span_of(pcm_segment_of(start), start);
            unsigned kept_here = 0, listed_free = 0;
            for (size_t k = 0; k < kept_count; k++)
                kept_here += pcm_span_of(pcm_segment_of(kept[k]), kept[k]) == span;
            if (visible && mincore(start, span->pages * PCM_PAGE_SIZE, vec) == 0)
                for (unsigned q = 0; q < span->pages; q++)
                    PCM_CHECK((vec[q] & 1) == (span_mask[j] >> q & 1), "%zu-byte span %p page %u: resident %d, "
                              "touched by a kept object %d", size, start, q, vec[q] & 1, span_mask[j] >> q & 1);
            PCM_CHECK(span->used == kept_here, "span %p: used %u, kept %u", start, span->used, kept_here);
            for (void *obj = span->free; obj; obj = pcm_link_next(obj, *(pcm_word_t *)obj), listed_free++) {
                bool ok = on_kept_pages(obj) && listed_free < pcm_span_capacity(span);
                PCM_CHECK(ok, "%zu-byte span %p: free object %p on a page given back", size, start, obj);
                if (!ok)
                    break; /* its link is gone with its page */
            }
            PCM_CHECK(listed_free == span_free[j], "%zu-byte span %p: %u objects on its free list, not %u", size,
                      start, listed_free, span_free[j]);
        }
        check_intact(kept, kept_count, "kept after the trim");
        pcm_test_printf("  %zu bytes: %zu spans, %zu objects kept, %zu pages given back%s\n", size, span_count,
                        kept_count, gone_count, pinned ? "" : " (not pinned)");
    }
}

PCM_TEST(span_trim_objects_after_a_trim_are_safe)
{
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; teardown(), z++) {
        if (!setup(sizes[z]))
            continue;
        size_t on_gone = 0, reused = 0, n = 0;
        for (; n < OBJECTS && (objects[n] = filled(pcm_malloc(size))); n++) {
            on_gone += on_gone_page(objects[n]);
            reused += on_kept_pages(objects[n]);
        }
        PCM_CHECK(on_gone == 0, "%zu-byte objects: %zu new ones on pages given back", size, on_gone);
        /* Pinned, the refills drained the trimmed spans' free lists first. */
        PCM_CHECK(!pinned || reused == free_count, "%zu-byte objects: %zu new ones on the kept pages, not the %zu free "
                  "ones there", size, reused, free_count);
        pcm_test_printf("  %zu bytes: %zu new objects, %zu of them on the kept pages\n", size, n, reused);
        for (size_t k = 0; k < kept_count; k++)
            objects[n + k] = kept[k];
        n += kept_count;
        kept_count = 0; /* freed below */
        disjoint(objects, n, "new and kept");
        check_intact(objects, n, "new and kept, all written");
        for (size_t i = 0; i < n; i++)
            pcm_free(objects[i]);
    }
}

/* A segment the trim gave back whole (to the segment pool, or on the rseq
 * path unmapped) is no segment now: its spans came back, and nothing of
 * it is left to read. */
static bool still_a_segment(uintptr_t page)
{
    return pcm_segment_index_has((void *)(page << PCM_PAGE_SHIFT));
}

/* Still pcmalloc's address space: a segment, or a chunk of the pool. */
static bool still_held(uintptr_t page)
{
    return pcm_segment_index_kind((void *)(page << PCM_PAGE_SHIFT)) != PCM_INDEX_NONE;
}

PCM_TEST(span_trim_spans_come_back_whole)
{
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; teardown(), z++) {
        if (!setup(sizes[z]))
            continue;
        for (size_t k = 0; k < kept_count; k++)
            pcm_free(kept[k]);
        kept_count = 0;
        pcm_malloc_trim(0);
        size_t must_cover = 0;
        for (size_t g = 0; g < gone_count; g++)
            must_cover += still_held(gone[g]);
        for (size_t j = 0; j < span_count; j++) {
            if (!still_a_segment(span_page[j]))
                continue;
            struct pcm_segment *s = pcm_segment_of((void *)(span_page[j] << PCM_PAGE_SHIFT));
            size_t p = span_page[j] - first_page(s);
            PCM_CHECK(!(s->page_used[p / PCM_WORD_BITS] >> (p % PCM_WORD_BITS) & 1), "%zu-byte span %p still in use "
                      "after its last object came home", size, (void *)(span_page[j] << PCM_PAGE_SHIFT));
        }
        size_t n = 0, covered = 0;
        while (n < 2 * OBJECTS && (objects[n] = filled(pcm_malloc(size))))
            n++;
        if (disjoint(objects, n, "cut again"))
            for (size_t i = 0, g = 0; i < n && g < gone_count; i++) {
                while (g < gone_count && gone[g] < last_page(objects[i]))
                    g++;
                if (g < gone_count && gone[g] == last_page(objects[i]))
                    covered++, g++;
            }
        /* Pinned, with no spare page left (the trim gave them back), first
         * fit cuts the new spans where the freed ones were: in the
         * segments the trim left, or in those it pooled, which the pool
         * gives back first.  (On the rseq path it unmaps them instead.) */
        PCM_CHECK(!pinned || covered >= must_cover, "%zu-byte objects: %zu of the %zu pages given back cut again, of "
                  "%zu in address space still pcmalloc's", size, covered, gone_count, must_cover);
        check_intact(objects, n, "cut again");
        for (size_t i = 0; i < n; i++)
            pcm_free(objects[i]);
        pcm_test_printf("  %zu bytes: %zu objects, on %zu of the %zu pages given back (%zu still pcmalloc's)\n",
                        size, n, covered, gone_count, must_cover);
    }
}

/* Objects above a page can cover a page whole between their first and
 * last.  When such an object is the only one on that page and it is free,
 * the trim gives the page back while its first and last pages stay for
 * their other objects - and the object must be set aside all the same:
 * left on the free list, it would be handed out with a page of zeroes in
 * its middle (in the hardened build, whose freed objects hold a filling,
 * a false "write after free" at byte 512 of a 5632-byte object).  5632:
 * a span of 8 over 11 pages, objects 2 and 5 over three pages each. */
PCM_TEST(span_trim_sets_aside_an_object_over_a_page_given_back)
{
    enum { BIG = 5632, COUNT = 64 };
    static unsigned char *big[COUNT];
    size = BIG;
    pin();
    pcm_malloc_trim(0);
    size_t n = 0;
    while (n < COUNT && (big[n] = filled(pcm_malloc(BIG))))
        n++;
    qsort(big, n, sizeof *big, by_value);
    /* A span whose 8 objects are all ours, in address order. */
    struct pcm_span *span = NULL;
    size_t at = 0;
    for (size_t i = 0, run; i < n && !span; i += run) {
        struct pcm_span *s = pcm_span_of(pcm_segment_of(big[i]), big[i]);
        for (run = 1; i + run < n && pcm_span_of(pcm_segment_of(big[i + run]), big[i + run]) == s; run++)
            ;
        if (run == pcm_span_capacity(s) && s->object_size == BIG && (uintptr_t)big[i] == s->start)
            span = s, at = i;
    }
    PCM_REQUIRE(span, "no span of %d-byte objects filled by this test alone among %zu objects", BIG, n);
    /* The first object over three pages whose neighbours share its first
     * and last: free it alone. */
    size_t j = 1;
    while (j + 1 < pcm_span_capacity(span) && last_page(big[at + j]) - first_page(big[at + j]) < 2)
        j++;
    PCM_REQUIRE(j + 1 < pcm_span_capacity(span), "no %d-byte object over three pages with a neighbour on each side", BIG);
    unsigned char *middle = big[at + j];
    uintptr_t middle_page = first_page(middle) + 1;
    pcm_free(middle);
    big[at + j] = NULL;
    pcm_malloc_trim(0);

    bool listed_free = false;
    for (void *obj = span->free; obj; obj = pcm_link_next(obj, *(pcm_word_t *)obj))
        listed_free |= obj == (void *)middle;
    unsigned char vec = 1;
    bool visible = residency_visible();
    if (visible)
        PCM_CHECK(mincore((void *)(middle_page << PCM_PAGE_SHIFT), PCM_PAGE_SIZE, &vec) == 0 && !(vec & 1),
                  "the page inside the freed object %p, which no other object touches, was not given back",
                  (void *)middle);
    PCM_CHECK(!listed_free, "the freed object %p lies over a page given back, yet it is still on its span's free "
              "list", (void *)middle);
    /* Pinned, the next objects of this size come from this heap's spans:
     * never the set-aside one, and intact once written. */
    static unsigned char *next[COUNT];
    size_t m = 0, again = 0;
    while (m < COUNT && (next[m] = filled(pcm_malloc(BIG))))
        again += next[m++] == middle;
    PCM_CHECK(again == 0, "the object over a page given back was handed out again");
    check_intact(next, m, "allocated after the trim");
    check_intact(&big[at], j, "kept before the freed one");
    check_intact(&big[at + j + 1], pcm_span_capacity(span) - j - 1, "kept after the freed one");
    pcm_test_printf("  %d-byte object %zu of its span, over pages %lu-%lu: set aside; page %lu %s\n", BIG, j,
                    (unsigned long)(first_page(middle) - first_page((void *)span->start)),
                    (unsigned long)(last_page(middle) - first_page((void *)span->start)),
                    (unsigned long)(middle_page - first_page((void *)span->start)),
                    visible ? "given back" : "(residency not checked)");
    for (size_t i = 0; i < m; i++)
        pcm_free(next[i]);
    for (size_t i = 0; i < n; i++)
        pcm_free(big[i]);
    pcm_malloc_trim(0);
    unpin();
}
