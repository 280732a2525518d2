/*
 * tests/unit/heap.c - where a heap cuts a new span (heap.c,
 * span_create_locked): once a span has gone back to its segment, a new
 * one goes over those pages, resident already, even where first fit would
 * take fresh pages of newer segments, more of them than a search scans.
 * The span layer is driven directly, under the heap's lock (given back
 * before a failure ends the test).
 */
#include "harness.h"

#include "pcmalloc.h"

#include "hardening.h"
#include "heap.h"
#include "segment.h"
#include "sizeclass.h"

#define FRESH_SEGMENTS 16u

/* Cut n objects of class cls from h (lock held) into a chain; NULL (a
 * failure recorded) if it cannot. */
static void *cut(struct pcm_heap *h, unsigned cls, unsigned n)
{
    void *first = NULL, *last = NULL;
    unsigned got = pcm_heap_cut_locked(h, cls, n, false, &first, &last);
    PCM_CHECK(got == n, "cut %u of %u objects of class %u", got, n, cls);
    return got == n ? first : NULL;
}

/* Spare pages of h's segments (lock held). */
static size_t spare_pages(const struct pcm_heap *h)
{
    size_t spare = 0;
    for (const struct pcm_segment *s = h->segments; s; s = s->next)
        spare += pcm_segment_spare_pages(s);
    return spare;
}

PCM_TEST(heap_new_span_reuses_spare_pages)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    struct pcm_heap *h = &pcm_heaps[0];
    pcm_heap_prepare(h);
    pcm_heap_lock(h);

    /* Two spans' worth of the biggest class, cut (touched) and given back:
     * the bin keeps one span, the other goes back to its segment. */
    unsigned big = PCM_CLASS_COUNT - 1, small = pcm_size_class(16384);
    void *objects = cut(h, big, 2 * pcm_class_span_objects(big));
    if (!objects)
        goto unlock;
    size_t spare_before = spare_pages(h);
    pcm_heap_return_chain_locked(h, objects);
    size_t spare = spare_pages(h);
    PCM_CHECK(spare >= spare_before + pcm_class_span_pages(big), "%zu spare pages, %zu before the release", spare,
              spare_before);

    /* Newer segments in front of the list, all fresh pages, more than a
     * search looks at (heap.c: SEARCH_SEGMENTS): first fit would cut in
     * the first of them. */
    struct pcm_segment *oldest = h->segments;
    for (unsigned i = 0; i < FRESH_SEGMENTS; i++) {
        struct pcm_segment *fresh = pcm_segment_create(pcm_heap_index(h));
        PCM_CHECK(fresh, "no segment");
        if (!fresh)
            goto unlock;
        fresh->next = h->segments;
        h->segments = fresh;
    }

    /* Spans of the small class until its partial list needs a new one. */
    objects = cut(h, small, pcm_class_span_objects(small) + 1);
    if (!objects)
        goto unlock;
    unsigned in_fresh = 0;
    for (void *obj = objects; obj; obj = pcm_link_next(obj, *(pcm_word_t *)obj))
        for (struct pcm_segment *s = h->segments; s != oldest; s = s->next)
            in_fresh += pcm_segment_of(obj) == s;
    size_t spare_after = spare_pages(h);
    PCM_CHECK(in_fresh == 0, "%u objects cut in fresh segments with %zu spare pages elsewhere", in_fresh, spare);
    PCM_CHECK(spare_after < spare, "the new spans used none of the %zu spare pages (%zu left)", spare, spare_after);
    pcm_heap_return_chain_locked(h, objects);
unlock:
    pcm_heap_unlock(h);
}
