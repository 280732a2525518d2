/*
 * percpu_cache.h - the per-CPU pop and push: the whole fast path of
 * malloc and free, behind an interface small enough that a restartable-
 * sequence version can replace this one without touching anything else.
 *
 * A cache is a LIFO of free objects of one size class, all from spans of
 * the heap that owns the cache.  Any thread may act on any cache at any
 * instruction - it may be preempted or migrated between reading the CPU
 * number and using that CPU's cache - so every change is one double-width
 * CAS of (top, tag).
 *
 * Invariants:
 *   - top == 0, or top is a free object whose word 0 is the next object
 *     (0 at the bottom; encoded in the hardened build, hardening.h) and
 *     whose word 1 is mark(top) | depth(top), depth counting the objects
 *     from it to the bottom (1 for the bottom one);
 *   - tag grows by one with every successful change.
 * Why ABA cannot hurt: a pop reads next = top->next and then CASes
 * (top, tag) -> (next, tag + 1).  If top was popped and pushed back in
 * between, next may be stale - but the tag has moved on, so the CAS fails
 * and no stale next is ever installed.  The read itself can land in an
 * object already handed out: a process on this path never unmaps a
 * segment (segment_pool.h), so it cannot fault, and the value is
 * discarded with the failed CAS.  The same holds for the depth read from
 * top by a push.  The hardened build checks the next it decoded before
 * the CAS, and calls a link that fails the check corrupt only after a CAS
 * that changes nothing proved (top, tag) still in place, so that stale
 * read is never reported either.
 *
 * Cost: one cas2 for each pop and push (lock cmpxchg16b on x86_64).
 */
#ifndef PCM_PERCPU_CACHE_H
#define PCM_PERCPU_CACHE_H

#include "atomic.h"
#include "free_mark.h"
#include "hardening.h"

static inline pcm_word_t pcm_cache_depth_of(pcm_word_t top)
{
    return top ? pcm_load_relaxed((volatile pcm_word_t *)pcm_object_word1((void *)top)) & PCM_DEPTH_MASK
               : 0;
}

/* An object, or NULL when the cache is empty. */
static inline void *pcm_cache_pop(volatile pcm_pair_t *cache)
{
    pcm_pair_t seen = pcm_pair_load_torn(cache);
    for (;;) {
        if (!seen.half.ptr)
            return NULL;
        pcm_word_t next = pcm_link_decode((void *)seen.half.ptr,
                                          pcm_load_relaxed((volatile pcm_word_t *)seen.half.ptr));
        if (PCM_HARDENED_BUILD && !pcm_link_plausible((void *)seen.half.ptr, next)) {
            /* stale (the CAS fails and retries) or corrupt (it succeeds) */
            if (pcm_cas2_acq_rel(cache, &seen, seen))
                pcm_link_corrupt((void *)seen.half.ptr, next);
            continue;
        }
        if (pcm_cas2_acq_rel(cache, &seen, pcm_pair_make(next, seen.half.tag + 1)))
            return (void *)seen.half.ptr;
    }
}

/* Push obj unless the cache already holds `limit` objects (then false,
 * and the caller flushes).  limit <= PCM_DEPTH_MASK. */
static inline bool pcm_cache_push(volatile pcm_pair_t *cache, void *obj, pcm_word_t limit)
{
    pcm_pair_t seen = pcm_pair_load_torn(cache);
    for (;;) {
        pcm_word_t depth = pcm_cache_depth_of(seen.half.ptr);
        if (depth >= limit)
            return false;
        *(pcm_word_t *)obj = pcm_link_encode(obj, seen.half.ptr);
        pcm_free_mark_set(obj, depth + 1);
        /* release (in acq_rel): the words above are visible to a popper */
        if (pcm_cas2_acq_rel(cache, &seen, pcm_pair_make((pcm_word_t)obj, seen.half.tag + 1)))
            return true;
    }
}

/* Take every object at once; returns the chain (linked by word 0,
 * encoded: follow it with pcm_link_next). */
static inline void *pcm_cache_take_all(volatile pcm_pair_t *cache)
{
    pcm_pair_t seen = pcm_pair_load_torn(cache);
    while (seen.half.ptr && !pcm_cas2_acq_rel(cache, &seen, pcm_pair_make(0, seen.half.tag + 1)))
        ;
    return (void *)seen.half.ptr;
}

/* Push a private chain first..last (linked by word 0 as a cache is, `count` objects)
 * with one CAS; the depths are rewritten for the top it lands on. */
static inline void pcm_cache_push_chain(volatile pcm_pair_t *cache, void *first, void *last, pcm_word_t count)
{
    pcm_pair_t seen = pcm_pair_load_torn(cache);
    for (;;) {
        pcm_word_t below = pcm_cache_depth_of(seen.half.ptr);
        if (below + count > PCM_DEPTH_MASK)
            below = PCM_DEPTH_MASK - count; /* saturate: depth is only a bound */
        pcm_word_t depth = below + count;
        for (pcm_word_t *obj = first;; obj = pcm_link_next(obj, obj[0])) {
            pcm_free_mark_set(obj, depth--);
            if (obj == last)
                break;
        }
        ((pcm_word_t *)last)[0] = pcm_link_encode(last, seen.half.ptr);
        if (pcm_cas2_acq_rel(cache, &seen, pcm_pair_make((pcm_word_t)first, seen.half.tag + 1)))
            return;
    }
}

#endif
