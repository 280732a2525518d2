/*
 * heap.c - the span layer of the per-CPU heaps: refilling an empty cache,
 * flushing a full one, draining remote frees, growing into new segments.
 *
 * Everything with `_locked` in its name, and everything it calls, runs with
 * the heap's lock held; the lock is only ever tried (pcm_heap_trylock), and
 * a thread that cannot get one heap's lock uses another heap.  No malloc.
 */
#include "heap.h"

#include <errno.h>
#include <sched.h>

#include "free_mark.h"
#include "os.h"
#include "percpu_cache.h"
#include "stats.h"

struct pcm_heap *pcm_heaps;
unsigned pcm_heap_count;
int pcm_fault_duplicate_refill;

/* A cache holds up to 64 KiB of one class, and at least 4 objects (at most
 * 1024); a refill moves up to half that, at most 64 objects. */
#define CACHE_BYTES (64u * 1024)
#define CACHE_MIN 4u
#define CACHE_MAX 1024u
#define BATCH_MAX 64u

_Static_assert(CACHE_MAX * 2 <= PCM_DEPTH_MASK, "depth field holds a cache and a refill");

bool pcm_heaps_init(unsigned count)
{
    size_t bytes = PCM_ALIGN_UP(count * sizeof(struct pcm_heap), PCM_PAGE_SIZE);
    struct pcm_heap *heaps = pcm_os_map(bytes);
    if (!heaps)
        return false;
    for (unsigned i = 0; i < count; i++) {
        heaps[i].index = i;
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
            uint32_t limit = CACHE_BYTES / (uint32_t)pcm_class_size(c);
            limit = limit < CACHE_MIN ? CACHE_MIN : limit > CACHE_MAX ? CACHE_MAX : limit;
            uint32_t batch = limit / 2 > BATCH_MAX ? BATCH_MAX : limit / 2;
            heaps[i].bins[c].limit = limit;
            heaps[i].bins[c].batch = batch;
        }
    }
    pcm_heap_count = count;
    pcm_heaps = heaps;
    return true;
}

bool pcm_heap_trylock(struct pcm_heap *h)
{
    pcm_word_t expected = 0;
    if (pcm_load_relaxed(&h->lock)) /* don't bounce the line for nothing */
        return false;
    /* acquire: the span layer as the last holder left it */
    return pcm_cas_acquire(&h->lock, &expected, 1);
}

void pcm_heap_unlock(struct pcm_heap *h)
{
    pcm_store_release(&h->lock, 0);
}

/* h's lock if free, else the first free one of the others.  When every
 * heap is busy (as many holders as CPUs, some preempted), wait with the
 * CPU hint, and after a bounded spin yield the CPU to the holders. */
static struct pcm_heap *lock_any(struct pcm_heap *h)
{
    for (unsigned spins = 0;; spins++) {
        for (unsigned i = 0; i < pcm_heap_count; i++) {
            struct pcm_heap *candidate = &pcm_heaps[(h->index + i) % pcm_heap_count];
            if (pcm_heap_trylock(candidate))
                return candidate;
        }
        if (spins < 16)
            pcm_cpu_relax();
        else
            sched_yield();
    }
}

void pcm_heaps_lock_all(void)
{
    for (unsigned i = 0; i < pcm_heap_count; i++)
        while (!pcm_heap_trylock(&pcm_heaps[i]))
            sched_yield();
}

void pcm_heaps_unlock_all(void)
{
    for (unsigned i = 0; i < pcm_heap_count; i++)
        pcm_heap_unlock(&pcm_heaps[i]);
}

/* ---- the partial list of a bin (lock held) ---- */

static void list_add(struct pcm_bin *bin, struct pcm_span *span)
{
    span->prev = NULL;
    span->next = bin->partial;
    if (bin->partial)
        bin->partial->prev = span;
    bin->partial = span;
    span->listed = 1;
}

static void list_remove(struct pcm_bin *bin, struct pcm_span *span)
{
    if (span->prev)
        span->prev->next = span->next;
    else
        bin->partial = span->next;
    if (span->next)
        span->next->prev = span->prev;
    span->prev = span->next = NULL;
    span->listed = 0;
}

/* ---- spans (lock held) ---- */

static struct pcm_span *span_create_locked(struct pcm_heap *h, unsigned cls)
{
    unsigned pages = (unsigned)pcm_class_span_pages(cls);
    for (struct pcm_segment *s = h->segments; s; s = s->next) {
        struct pcm_span *span = pcm_segment_span_create(s, cls, pages);
        if (span) {
            h->stats.spans_created++;
            return span;
        }
    }
    struct pcm_segment *s = pcm_segment_create(h->index);
    if (!s)
        return NULL;
    s->next = h->segments;
    h->segments = s;
    h->stats.spans_created++;
    return pcm_segment_span_create(s, cls, pages);
}

/* An object of one of h's spans comes back to its span. */
static void span_return_locked(struct pcm_heap *h, void *obj)
{
    struct pcm_segment *s = pcm_segment_of(obj);
    struct pcm_span *span = pcm_span_of(s, obj);
    unsigned cls = span->class_plus1 - 1u;
    struct pcm_bin *bin = &h->bins[cls];
    *(void **)obj = span->free;
    pcm_free_mark_set(obj, 0);
    span->free = obj;
    span->used--;
    h->stats.returned[cls]++;
    if (!span->listed)
        list_add(bin, span);
    /* Every object is home: give the pages back to the segment, unless
     * this is the bin's only span (keeps a malloc/free loop from cutting
     * and releasing a span each time). */
    if (span->used == 0 && (bin->partial != span || span->next)) {
        list_remove(bin, span);
        pcm_segment_span_release(s, span);
        h->stats.spans_released++;
    }
}

void pcm_heap_drain_remote_locked(struct pcm_heap *h)
{
    /* acq_rel: acquire pairs with the pushers' release CAS */
    pcm_word_t *obj = (pcm_word_t *)pcm_swap_acq_rel(&h->remote, 0);
    while (obj) {
        pcm_word_t *next = (pcm_word_t *)obj[0];
        span_return_locked(h, obj);
        h->stats.remote_drained++;
        obj = next;
    }
}

/* Cut up to bin->batch objects from the bin's spans; return one, cache the
 * rest. */
static void *refill_locked(struct pcm_heap *h, unsigned cls)
{
    struct pcm_bin *bin = &h->bins[cls];
    pcm_word_t *first = NULL, *last = NULL;
    unsigned count = 0;
    while (count < bin->batch) {
        struct pcm_span *span = bin->partial;
        if (!span) {
            span = span_create_locked(h, cls);
            if (!span)
                break;
            list_add(bin, span);
        }
        while (count < bin->batch) {
            pcm_word_t *obj = span->free;
            if (obj) {
                span->free = (void *)obj[0];
            } else if (span->carved < span->capacity) {
                obj = (pcm_word_t *)(span->start + (uintptr_t)span->carved * span->object_size);
                span->carved++;
                pcm_segment_touched(pcm_segment_of(obj), (uintptr_t)obj, (uintptr_t)obj + span->object_size);
            } else {
                break;
            }
            span->used++;
            if (last)
                last[0] = (pcm_word_t)obj;
            else
                first = obj;
            last = obj;
            count++;
        }
        if (!span->free && span->carved == span->capacity)
            list_remove(bin, span);
    }
    if (!count)
        return NULL;
    h->stats.refills++;
    h->stats.served[cls] += count;
    if (__builtin_expect(pcm_fault_duplicate_refill, 0) && count > 1) {
        last[0] = (pcm_word_t)first; /* first is also cached: handed out twice */
        last = first;
        count++;
    }
    if (count > 1)
        pcm_cache_push_chain(&bin->cache, (void *)first[0], last, count - 1);
    return first;
}

void *pcm_heap_alloc_slow(struct pcm_heap *h, unsigned cls)
{
    struct pcm_heap *locked = lock_any(h);
    pcm_heap_drain_remote_locked(locked);
    /* Another thread may have refilled the cache while we waited. */
    void *obj = pcm_cache_pop(&locked->bins[cls].cache);
    if (!obj)
        obj = refill_locked(locked, cls);
    pcm_heap_unlock(locked);
    if (!obj)
        errno = ENOMEM;
    return obj;
}

void pcm_heap_free_slow(struct pcm_heap *h, unsigned cls, void *obj)
{
    struct pcm_bin *bin = &h->bins[cls];
    if (!pcm_heap_trylock(h)) {
        /* Busy: exceed the bound for now (one more object); the next free
         * to find the cache full flushes it. */
        pcm_cache_push_chain(&bin->cache, obj, obj, 1);
        return;
    }
    h->stats.flushes++;
    /* Keep the most recently freed half (warm in this CPU's cache), give
     * the rest and obj back to their spans. */
    pcm_word_t *chain = pcm_cache_take_all(&bin->cache);
    pcm_word_t *keep_first = chain, *keep_last = NULL;
    unsigned kept = 0;
    while (chain && kept < bin->limit / 2) {
        keep_last = chain;
        chain = (pcm_word_t *)chain[0];
        kept++;
    }
    while (chain) {
        pcm_word_t *next = (pcm_word_t *)chain[0];
        span_return_locked(h, chain);
        chain = next;
    }
    span_return_locked(h, obj);
    pcm_heap_drain_remote_locked(h);
    pcm_heap_unlock(h);
    if (kept)
        pcm_cache_push_chain(&bin->cache, keep_first, keep_last, kept);
}
