/*
 * heap.c - the span layer of the per-CPU heaps: cutting objects from spans
 * for a cache, taking them back, draining remote frees, growing into new
 * segments, and the heap locks.  The caches themselves are the fast
 * paths' business (cache_cas_slow.c, cache_rseq_slow.c).
 *
 * Everything with `_locked` in its name, and everything it calls, runs with
 * the heap's lock held; the lock is only ever tried (pcm_heap_trylock), and
 * a thread that cannot get one heap's lock uses another heap.  No malloc.
 */
#include "heap.h"

#include <errno.h>
#include <sched.h>

#include "free_mark.h"
#include "hardening.h"
#include "os.h"
#include "stats.h"

struct pcm_heap *pcm_heaps;
unsigned pcm_heap_count;
int pcm_fault_duplicate_refill;

/* A cache holds up to 64 KiB of one class, and at least 4 objects (at most
 * 1024); a refill moves up to half that, at most 64 objects. */
struct pcm_bin_shape pcm_bin_shapes[PCM_CLASS_COUNT];
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
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        uint32_t limit = CACHE_BYTES / (uint32_t)pcm_class_size(c);
        limit = limit < CACHE_MIN ? CACHE_MIN : limit > CACHE_MAX ? CACHE_MAX : limit;
        pcm_bin_shapes[c].limit = limit;
        pcm_bin_shapes[c].batch = limit / 2 > BATCH_MAX ? BATCH_MAX : limit / 2;
    }
    for (unsigned i = 0; i < count; i++) {
        heaps[i].index = i;
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
            heaps[i].bins[c].limit = pcm_bin_shapes[c].limit;
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

/* When every heap is busy (as many holders as CPUs, some preempted), wait
 * with the CPU hint, and after a bounded spin yield the CPU to the holders. */
struct pcm_heap *pcm_heap_lock_any(struct pcm_heap *h)
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

void pcm_heap_lock(struct pcm_heap *h)
{
    while (!pcm_heap_trylock(h))
        sched_yield();
}

void pcm_heaps_lock_all(void)
{
    for (unsigned i = 0; i < pcm_heap_count; i++)
        pcm_heap_lock(&pcm_heaps[i]);
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
void pcm_heap_return_locked(struct pcm_heap *h, void *obj)
{
    struct pcm_segment *s = pcm_segment_of(obj);
    struct pcm_span *span = pcm_span_of(s, obj);
    unsigned cls = span->class_plus1 - 1u;
    struct pcm_bin *bin = &h->bins[cls];
    *(pcm_word_t *)obj = pcm_link_encode(obj, (pcm_word_t)span->free);
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

void pcm_heap_return_chain_locked(struct pcm_heap *h, void *chain)
{
    while (chain) {
        void *next = pcm_link_next(chain, *(pcm_word_t *)chain);
        pcm_heap_return_locked(h, chain);
        chain = next;
    }
}

void pcm_heap_drain_remote_locked(struct pcm_heap *h)
{
    /* acq_rel: acquire pairs with the pushers' release CAS */
    pcm_word_t *obj = (pcm_word_t *)pcm_swap_acq_rel(&h->remote, 0);
    while (obj) {
        pcm_word_t *next = pcm_link_next(obj, obj[0]);
        pcm_heap_return_locked(h, obj);
        h->stats.remote_drained++;
        obj = next;
    }
}

unsigned pcm_heap_cut_locked(struct pcm_heap *h, unsigned cls, unsigned want, void **first_out, void **last_out)
{
    struct pcm_bin *bin = &h->bins[cls];
    pcm_word_t *first = NULL, *last = NULL;
    unsigned count = 0;
    while (count < want) {
        struct pcm_span *span = bin->partial;
        if (!span) {
            span = span_create_locked(h, cls);
            if (!span)
                break;
            list_add(bin, span);
        }
        uint32_t carved_before = span->carved;
        while (count < want) {
            pcm_word_t *obj = span->free;
            if (obj) {
                span->free = pcm_link_next(obj, obj[0]);
            } else if (span->carved < span->capacity) {
                obj = (pcm_word_t *)(span->start + (uintptr_t)span->carved * span->object_size);
                span->carved++;
            } else {
                break;
            }
            span->used++;
            if (last)
                last[0] = pcm_link_encode(last, (pcm_word_t)obj);
            else
                first = obj;
            last = obj;
            count++;
        }
        /* The objects carved just now, in one go (they are contiguous). */
        if (span->carved != carved_before) {
            pcm_hardened_carved(span->start + (uintptr_t)carved_before * span->object_size,
                                span->carved - carved_before, span->object_size);
            pcm_segment_touched(pcm_segment_of((void *)span->start),
                                span->start + (uintptr_t)carved_before * span->object_size,
                                span->start + (uintptr_t)span->carved * span->object_size);
        }
        if (!span->free && span->carved == span->capacity)
            list_remove(bin, span);
    }
    if (count) {
        last[0] = pcm_link_encode(last, 0);
        pcm_hardened_shuffle(h->index, (void **)&first, (void **)&last, count);
        h->stats.refills++;
        h->stats.served[cls] += count;
    }
    *first_out = first;
    *last_out = last;
    return count;
}

void pcm_heap_release_empty_spans_locked(struct pcm_heap *h)
{
    /* Spans with no object out, kept only as their bin's last span. */
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        struct pcm_span *span = h->bins[c].partial;
        while (span) {
            struct pcm_span *next = span->next;
            if (span->used == 0) {
                list_remove(&h->bins[c], span);
                pcm_segment_span_release(pcm_segment_of((void *)span->start), span);
                h->stats.spans_released++;
            }
            span = next;
        }
    }
}

size_t pcm_heap_trim_locked(struct pcm_heap *h)
{
    pcm_heap_drain_remote_locked(h);
    pcm_heap_release_empty_spans_locked(h);
    size_t released = 0;
    for (struct pcm_segment *s = h->segments; s; s = s->next)
        released += pcm_segment_decommit_free(s);
    return released;
}
