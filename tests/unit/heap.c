/*
 * tests/unit/heap.c - where a heap cuts a new span (heap.c,
 * span_create_locked): once a span has gone back to its segment, a new
 * one goes over those pages, resident already, even where first fit would
 * take fresh pages of newer segments, more of them than a search scans.
 * And how a chain of objects goes back to its spans (return_runs_locked):
 * run by run, up to a count.  The span layer is driven directly, under
 * the heap's lock (given back before a failure ends the test).
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

static struct pcm_span *span_of(void *obj)
{
    return pcm_span_of(pcm_segment_of(obj), obj);
}

static uint32_t used_of(void *obj)
{
    return span_of(obj)->used;
}

static void link_to(void *obj, void *next)
{
    *(pcm_word_t *)obj = pcm_link_encode(obj, (pcm_word_t)next);
}

/* A chain given back in part (heap.c, return_runs_locked): each run of
 * objects in one span goes home in one splice, a run is cut where the
 * count runs out, and what is left comes back linked as it was. */
PCM_TEST(heap_return_first_stops_inside_a_run)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    struct pcm_heap *h = &pcm_heaps[0];
    pcm_heap_prepare(h);
    pcm_heap_lock(h);

    /* Two spans' worth: objects of two different spans, a and b. */
    unsigned cls = pcm_size_class(1024), per_span = pcm_class_span_objects(cls);
    void *objects = cut(h, cls, 2 * per_span);
    if (!objects)
        goto unlock;
    void *a[3] = {NULL}, *b[3] = {NULL};
    unsigned na = 0, nb = 0;
    void *rest = NULL; /* the others, kept out until the end */
    for (void *obj = objects, *next; obj; obj = next) {
        next = pcm_link_next(obj, *(pcm_word_t *)obj);
        if (na < 3 && (na == 0 || span_of(obj) == span_of(a[0])))
            a[na++] = obj;
        else if (nb < 3 && span_of(obj) != span_of(a[0]) && (nb == 0 || span_of(obj) == span_of(b[0])))
            b[nb++] = obj;
        else {
            link_to(obj, rest);
            rest = obj;
        }
    }
    PCM_CHECK(na == 3 && nb == 3, "objects of two spans: %u and %u", na, nb);
    if (na < 3 || nb < 3)
        goto unlock;

    /* a0 a1 | b0 b1 b2 | a2, given back 4 at most: a0 a1 and b0 b1 go
     * home, b2 a2 come back. */
    void *chain[6] = {a[0], a[1], b[0], b[1], b[2], a[2]};
    for (unsigned i = 0; i < 6; i++)
        link_to(chain[i], i < 5 ? chain[i + 1] : NULL);
    uint32_t used_a = used_of(a[0]), used_b = used_of(b[0]);
    void *left = pcm_heap_return_first_locked(h, chain[0], 4);
    PCM_CHECK(left == b[2], "left %p, not the fifth object %p", left, b[2]);
    PCM_CHECK(used_of(a[0]) == used_a - 2 && used_of(b[0]) == used_b - 2, "used %u and %u, were %u and %u",
              used_of(a[0]), used_of(b[0]), used_a, used_b);
    if (left == b[2])
        PCM_CHECK(pcm_link_next(b[2], *(pcm_word_t *)b[2]) == a[2], "the rest is not linked as it was");

    /* The rest, to the chain's end. */
    pcm_heap_return_chain_locked(h, left);
    PCM_CHECK(used_of(a[0]) == used_a - 3 && used_of(b[0]) == used_b - 3, "used %u and %u, were %u and %u",
              used_of(a[0]), used_of(b[0]), used_a, used_b);
    pcm_heap_return_chain_locked(h, rest);
unlock:
    pcm_heap_unlock(h);
}
