/*
 * remote.h - frees from other CPUs: lock-free multi-producer stacks per
 * heap, pushed by any thread, each taken whole by the owner (its lock
 * held): heap->remote_class[c] for the objects of each class c below
 * PCM_OUTGOING_CLASSES - the rseq path's refill of c takes them straight
 * into the cache, skipping the spans - and heap->remote for the rest.
 *
 * Invariant of each: 0 or the top of a chain of free objects of the
 * heap's spans (of its class), linked by word 0 (encoded in the hardened
 * build, hardening.h), each word 1 = mark | depth (depth is a hint: about
 * the number below it when it was pushed, read without a lock; only the
 * top's is ever read).  A push adds one object or a whole chain, linking
 * the chain's last object to the top it saw.
 * Why ABA cannot hurt: a drain or a refill takes the whole chain with one
 * swap and never looks at next pointers while others push; a push only links its
 * object to whatever top it saw and succeeds only if that top is still
 * the top - if the same object became top again in between, linking to it
 * is still correct, because a push depends on the top's identity alone,
 * never on the top's contents.
 */
#ifndef PCM_REMOTE_H
#define PCM_REMOTE_H

#include "heap.h"

/* When a stack gets this deep, the pusher drains it itself if it can take
 * the owner's lock: a CPU that stopped allocating never drains its own. */
#define PCM_REMOTE_HELP_DEPTH 256u

/* The stack of owner's that takes objects of class cls. */
static inline volatile pcm_word_t *pcm_remote_list(struct pcm_heap *owner, unsigned cls)
{
    return cls < PCM_OUTGOING_CLASSES ? &owner->remote_class[cls] : &owner->remote;
}

/* obj (of owner's spans, class cls) was freed on another CPU. */
void pcm_remote_free(struct pcm_heap *owner, unsigned cls, void *obj);

/* The same for a chain of `count` objects first..last of class cls
 * (linked by word 0, each already marked free), pushed in one go: the
 * run of owner's objects that another CPU's cache gives back. */
void pcm_remote_free_chain(struct pcm_heap *owner, unsigned cls, void *first, void *last, unsigned count);

#endif
