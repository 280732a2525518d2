/*
 * span_trim.c - give back the pages inside a span that still holds
 * objects but none on those pages (segment.h: pcm_span_trim_free_pages).
 *
 * A span is only given back whole, when its last object comes home; after
 * a phase that freed most of a program's objects, a few survivors keep
 * many spans, and all their pages, resident.  Here each page whose every
 * carved object is on the span's free list is decommitted.  The free
 * objects touching such a page lose their contents - their links with
 * them - so they are first taken off the free list and set aside: the
 * span no longer counts them anywhere, and gets them back only when it is
 * given back whole (its used count, which they are not part of, reaching
 * zero) and cut again from zeroed pages.
 */
#include "segment.h"

#include "hardening.h"
#include "sizeclass.h"

#define MAX_OBJECTS 1024u /* the most a span of any class holds */
#define MAX_PAGES 256u    /* the longest span, in pages */

static inline bool bit(const pcm_word_t *map, size_t i)
{
    return (map[i / PCM_WORD_BITS] >> (i % PCM_WORD_BITS)) & 1;
}

static inline void set_bit(pcm_word_t *map, size_t i)
{
    map[i / PCM_WORD_BITS] |= (pcm_word_t)1 << (i % PCM_WORD_BITS);
}

/* Any of bits [first, last] set? */
static bool any_bit(const pcm_word_t *map, size_t first, size_t last)
{
    for (size_t i = first; i <= last; i++)
        if (bit(map, i))
            return true;
    return false;
}

/* Objects [first, last] of span, as far as they were ever carved, all free? */
static bool all_free(const struct pcm_span *span, const pcm_word_t *free_objects, uint32_t first, uint32_t last)
{
    if (last >= span->carved)
        last = span->carved - 1;
    for (uint32_t i = first; i <= last; i++)
        if (!bit(free_objects, i))
            return false;
    return true;
}

size_t pcm_span_trim_free_pages(struct pcm_segment *s, struct pcm_span *span)
{
    /* One page, or no free object: every page holds a live one. */
    if (span->pages < 2 || !span->free || span->carved == 0)
        return 0;
    if (pcm_span_capacity(span) > MAX_OBJECTS || span->pages > MAX_PAGES)
        return 0; /* (no class has such spans: sizeclass.c) */
    pcm_word_t free_objects[MAX_OBJECTS / PCM_WORD_BITS] = {0};
    for (void *obj = span->free; obj; obj = pcm_link_next(obj, *(pcm_word_t *)obj))
        set_bit(free_objects, pcm_span_index(span, (uint32_t)((uintptr_t)obj - span->start)));

    /* The pages to give back: touched by carved objects, all of them free. */
    pcm_word_t gone[MAX_PAGES / PCM_WORD_BITS] = {0};
    size_t size = span->object_size, carved_end = (size_t)span->carved * size, any = 0;
    for (size_t page = 0; page < span->pages; page++) {
        size_t from = page << PCM_PAGE_SHIFT, to = from + PCM_PAGE_SIZE;
        if (from >= carved_end)
            break; /* never written: not resident */
        if (all_free(span, free_objects, (uint32_t)(from / size), (uint32_t)((to - 1) / size))) {
            set_bit(gone, page);
            any++;
        }
    }
    if (!any)
        return 0;

    /* Off the free list, before their links are gone: every free object
     * that touches a page given back. */
    pcm_word_t head = 0, *tail = &head;
    for (void *obj = span->free, *next; obj; obj = next) {
        next = pcm_link_next(obj, *(pcm_word_t *)obj);
        size_t offset = (uintptr_t)obj - span->start;
        /* Every page it touches: an object above a page can cover one
         * whole between its first and last, and that page goes when the
         * object is its only one (its first and last kept by neighbours). */
        if (any_bit(gone, offset >> PCM_PAGE_SHIFT, (offset + size - 1) >> PCM_PAGE_SHIFT))
            continue;
        *tail = tail == &head ? (pcm_word_t)obj : pcm_link_encode(tail, (pcm_word_t)obj);
        tail = obj;
    }
    if (tail != &head)
        *tail = pcm_link_encode(tail, 0);
    span->free = (void *)head;

    size_t released = 0, span_page = ((uintptr_t)span->start - (uintptr_t)s) >> PCM_PAGE_SHIFT;
    for (size_t page = 0; page < span->pages;) {
        if (!bit(gone, page)) {
            page++;
            continue;
        }
        size_t first = page;
        while (page < span->pages && bit(gone, page))
            page++;
        /* (refused: the pages stay, and their objects set aside) */
        released += pcm_segment_decommit_pages(s, span_page + first, span_page + page);
    }
    return released;
}
