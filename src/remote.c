/*
 * remote.c - pushing onto another heap's remote-free stack (remote.h).
 * Lock-free; the only lock here is an optional try to help drain.
 */
#include "remote.h"

#include "free_mark.h"
#include "hardening.h"

/* The depth the top of `count` objects pushed onto `seen` would have, from
 * the stack's hint: the depth the last push gave its top.  Not from seen's
 * word 1: seen may have been taken by a drain since we read it, gone back
 * to an empty span, and its segment unmapped (the rseq path unmaps them,
 * segment_pool.h) while this thread was preempted between the two loads -
 * the read would fault.  The hint is racy (pushes that overlap may store
 * each other's; a drain leaves it for an empty stack, which it does not
 * count), so a depth may be off by what overlapping pushes added:
 * remote.h says what a wrong depth costs. */
static inline pcm_word_t remote_depth_hint(const struct pcm_remote_stack *stack, pcm_word_t seen, pcm_word_t count)
{
    pcm_word_t depth = (seen ? pcm_load_relaxed(&stack->depth_hint) & PCM_DEPTH_MASK : 0) + count;
    return depth > PCM_DEPTH_MASK ? PCM_DEPTH_MASK : depth;
}

void pcm_remote_free_chain(struct pcm_heap *owner, unsigned cls, void *first, void *last, unsigned count)
{
    struct pcm_remote_stack *stack = pcm_remote_stack(owner, cls);
    volatile pcm_word_t *list = &stack->top;
    /* A class's stack may become the owner's cache whole (heap.c:
     * pcm_heap_take_remote_class_locked): its bottom links where a list
     * of that cache ends (heap.h). */
    pcm_word_t end = cls < PCM_OUTGOING_CLASSES ? pcm_heap_list_end(owner, cls) : 0;
    pcm_word_t seen = pcm_load_acquire(list);
    pcm_word_t depth;
    do {
        depth = remote_depth_hint(stack, seen, count);
        /* Their depths on the stack: it then reads as a cache would
         * (percpu_cache.h), and a refill can take it as one.  (depth >=
         * count: counts stay far below the mask.) */
        pcm_chain_mark_depths(first, count, depth);
        *(pcm_word_t *)last = pcm_link_encode(last, seen ? seen : end);
        /* release: the objects' words are written before they can be drained */
    } while (!pcm_cas_acq_rel(list, &seen, (pcm_word_t)first));
    pcm_store_relaxed(&stack->depth_hint, depth);

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
