/*
 * cache_cas_slow.c - the slow halves of the CAS fast path (heap.h): an
 * empty cache refilled from the spans, a full one flushed back to them.
 * Any thread may act on any heap's cache here, by the CAS operations of
 * percpu_cache.h; never used when the rseq path was chosen.  No malloc.
 */
#include "heap.h"

#include <errno.h>

#include "decay.h"
#include "free_mark.h"
#include "hardening.h"
#include "percpu_cache.h"
#include "remote.h"

/* Cut a batch from the locked heap; return one, cache the rest there. */
static void *refill_locked(struct pcm_heap *h, unsigned cls)
{
    bool others_home;
    unsigned want = pcm_heap_refill_plan(h, cls, &others_home);
    if (others_home) {
        /* The other big classes' cached objects home first: the span cut
         * next can go over their pages (heap.h). */
        for (unsigned c = PCM_CLASS_BIG_FIRST; c < PCM_CLASS_COUNT; c++)
            if (pcm_bin_listed_hint(&h->bins[c]))
                pcm_heap_return_chain_locked(h, pcm_cache_take_all(&h->bins[c].cache));
    }
    void *first, *last;
    unsigned count = pcm_heap_cut_locked(h, cls, want, false, &first, &last);
    pcm_heap_refilled_locked(h, cls, true);
    if (!count)
        return NULL;
    if (__builtin_expect(pcm_fault_duplicate_refill, 0) && count > 1) {
        *(pcm_word_t *)last = pcm_link_encode(last, (pcm_word_t)first); /* first is also cached: handed out twice */
        last = first;
        count++;
    }
    if (count > 1)
        pcm_cache_push_chain(&h->bins[cls].cache, pcm_link_next(first, *(pcm_word_t *)first), last, count - 1);
    return first;
}

void *pcm_heap_alloc_slow(struct pcm_heap *h, unsigned cls)
{
    pcm_decay_maybe();
    struct pcm_heap *locked = pcm_heap_lock_any(h);
    pcm_heap_drain_remote_locked(locked, true);
    /* Another thread may have refilled the cache while we waited. */
    void *obj = pcm_cache_pop(&locked->bins[cls].cache);
    /* A big class: a cached object of a class up to twice as big will do
     * (heap.h: pcm_heap_refill_plan). */
    if (!obj && cls >= PCM_CLASS_BIG_FIRST)
        for (unsigned c = cls + 1, end = pcm_big_stand_ins_end(cls); !obj && c < end; c++)
            obj = pcm_cache_pop(&locked->bins[c].cache);
    if (!obj)
        obj = refill_locked(locked, cls);
    pcm_heap_unlock(locked);
    if (!obj)
        errno = ENOMEM;
    return obj;
}

void pcm_heap_free_slow(struct pcm_heap *h, unsigned cls, void *obj)
{
    pcm_decay_maybe();
    struct pcm_bin *bin = &h->bins[cls];
    if (!pcm_heap_trylock(h)) {
        /* Busy: onto h's remote queue, which its lock holders drain.  (Not
         * one over the bound into the cache: under contention that let
         * caches grow without limit, beyond what a flush or a decay tick
         * ever reaches.) */
        pcm_remote_free(h, cls, obj);
        return;
    }
    h->stats.flushes++;
    /* Keep the most recently freed half (warm in this CPU's cache), give
     * the rest and obj back to their spans. */
    pcm_word_t *chain = pcm_cache_take_all(&bin->cache);
    pcm_word_t *keep_first = chain, *keep_last = NULL;
    unsigned kept = 0;
    while (chain && kept < pcm_bin_limit(bin) / 2) {
        keep_last = chain;
        chain = pcm_link_next(chain, chain[0]);
        kept++;
    }
    pcm_heap_return_chain_locked(h, chain);
    pcm_heap_return_locked(h, obj);
    pcm_heap_flushed_locked(h, cls);
    pcm_heap_drain_remote_locked(h, true);
    pcm_heap_unlock(h);
    if (kept)
        pcm_cache_push_chain(&bin->cache, keep_first, keep_last, kept);
}

bool pcm_heap_drain_caches_cas_locked(struct pcm_heap *h)
{
    bool any = false;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        void *chain = pcm_cache_take_all(&h->bins[c].cache);
        any |= chain != NULL;
        pcm_heap_return_chain_locked(h, chain);
    }
    return any;
}

void pcm_heap_flush_caches_cas(void)
{
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        if (!pcm_heap_is_ready(i))
            continue; /* an empty cache, on pages better left untouched */
        struct pcm_heap *h = &pcm_heaps[i];
        pcm_heap_lock(h);
        pcm_heap_drain_caches_cas_locked(h);
        pcm_heap_unlock(h);
    }
}
