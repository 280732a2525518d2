/*
 * remote.c - pushing onto another heap's remote-free stack (remote.h).
 * Lock-free; the only lock here is an optional try to help drain.
 */
#include "remote.h"

#include "free_mark.h"
#include "hardening.h"

/* The depth the top of `count` objects pushed onto `seen` would have.  A racy hint:
 * `seen` may already be drained and reused (its word 1 rewritten by the
 * drain or by its new owner while we read it); then the push's CAS fails,
 * unless seen came back to the top meanwhile (remote.h: what a wrong
 * depth costs).  Its own function so that ThreadSanitizer's
 * suppression of this one deliberate race (tests/sanitize/tsan.supp) can
 * name it and nothing else. */
static inline pcm_word_t remote_depth_hint(pcm_word_t seen, pcm_word_t count)
{
    pcm_word_t depth = (seen ? pcm_load_relaxed((volatile pcm_word_t *)seen + 1) & PCM_DEPTH_MASK : 0) + count;
    return depth > PCM_DEPTH_MASK ? PCM_DEPTH_MASK : depth;
}

void pcm_remote_free_chain(struct pcm_heap *owner, unsigned cls, void *first, void *last, unsigned count)
{
    volatile pcm_word_t *list = pcm_remote_list(owner, cls);
    /* acquire (here and on a failed CAS): the depth the top's pusher
     * wrote is visible to the hint */
    pcm_word_t seen = pcm_load_acquire(list);
    pcm_word_t depth;
    do {
        depth = remote_depth_hint(seen, count);
        /* Their depths on the stack: it then reads as a cache would
         * (percpu_cache.h), and a refill can take it as one.  (depth >=
         * count: counts stay far below the mask.) */
        pcm_chain_mark_depths(first, count, depth);
        *(pcm_word_t *)last = pcm_link_encode(last, seen);
        /* release: the objects' words are written before they can be drained */
    } while (!pcm_cas_acq_rel(list, &seen, (pcm_word_t)first));

    /* Only tried: the caller may hold another heap's lock. */
    if (depth >= PCM_REMOTE_HELP_DEPTH && pcm_heap_trylock(owner)) {
        pcm_heap_drain_remote_list_locked(owner, list);
        pcm_heap_unlock(owner);
    }
}

void pcm_remote_free(struct pcm_heap *owner, unsigned cls, void *obj)
{
    pcm_remote_free_chain(owner, cls, obj, obj, 1);
}
