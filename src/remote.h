/*
 * remote.h - frees from other CPUs: lock-free multi-producer stacks per
 * heap, pushed by any thread, each taken whole by the owner (its lock
 * held): heap->remote_class[c] for the objects of each class c below
 * PCM_OUTGOING_CLASSES - the rseq path's refill of c takes them straight
 * into the cache, skipping the spans - and heap->remote for the rest.
 *
 * Invariant of each: 0 or the top of a chain of free objects of the
 * heap's spans (of its class), linked by word 0 (encoded in the hardened
 * build, hardening.h), each word 1 = mark | depth, depth the number of
 * objects from it to the bottom - as in a cache (percpu_cache.h), so that
 * a refill can take a stack that fits as its cache without walking it
 * (heap.c: pcm_heap_take_remote_class_locked), where the walk was a chain
 * of misses on lines the freeing CPUs hold.  A push adds one object or a
 * whole chain, marking its objects with the depths they get on top of the
 * top it saw (whose depth it reads from the stack's hint, which each push
 * sets after its CAS: never from the top object, which a drain may have
 * taken and its segment unmapped since: remote.c), and linking the
 * chain's last object to that top - or, onto an empty class stack, to
 * where the owner's cache of the class ends (heap.h: pcm_heap_list_end;
 * 0 unless the rseq lists end at their slot), so that the chain is
 * already ended right when a refill takes it as the cache.
 * The depths are exact when pushes do not overlap.  Pushes that overlap
 * may read a hint that another's CAS has made old, or store one over a
 * newer; and a top taken that came back to the top between the pusher's
 * read and its CAS (ABA, below) gives the pushed chain depths counted
 * from the old stack.  A wrong depth only misstates a count: a cache
 * taken with it holds more or fewer objects than its top's depth says, so
 * it flushes late or early, as a saturated depth does on the CAS path; no
 * walk stops on a depth (every one follows the links to their end), so no
 * object is lost or handed out twice.
 * (tests/unit/fast_path.c gives a refill a stack with wrong depths.)
 * Why ABA cannot hurt: a drain or a refill takes the whole chain with one
 * swap and never looks at next pointers while others push; a push only links its
 * object to whatever top it saw and succeeds only if that top is still
 * the top - if the same object became top again in between, linking to it
 * is still correct, because the links depend on the top's identity alone;
 * only the depths depend on its contents, and a wrong one costs what is
 * said above.  A cache never gets a depth past its limit from a push (a
 * push checks first), so no depth overflows into the mark.
 */
#ifndef PCM_REMOTE_H
#define PCM_REMOTE_H

#include "heap.h"

/* When a stack gets this deep, the pusher drains it itself if it can take
 * the owner's lock: a CPU that stopped allocating never drains its own. */
#define PCM_REMOTE_HELP_DEPTH 256u

/* The stack of owner's that takes objects of class cls. */
static inline struct pcm_remote_stack *pcm_remote_stack(struct pcm_heap *owner, unsigned cls)
{
    return cls < PCM_OUTGOING_CLASSES ? &owner->remote_class[cls] : &owner->remote;
}

/* Its top word. */
static inline volatile pcm_word_t *pcm_remote_list(struct pcm_heap *owner, unsigned cls)
{
    return &pcm_remote_stack(owner, cls)->top;
}

/* obj (of owner's spans, class cls) was freed on another CPU. */
void pcm_remote_free(struct pcm_heap *owner, unsigned cls, void *obj);

/* The same for a chain of `count` objects first..last of class cls
 * (linked by word 0, each already marked free), pushed in one go: the
 * run of owner's objects that another CPU's cache gives back. */
void pcm_remote_free_chain(struct pcm_heap *owner, unsigned cls, void *first, void *last, unsigned count);

#endif
