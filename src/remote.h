/*
 * remote.h - frees from other CPUs: a lock-free multi-producer stack per
 * heap (heap->remote), pushed by any thread, drained whole by the owner.
 *
 * Invariant: remote == 0 or it is the top of a chain of free objects of
 * the heap's spans, linked by word 0 (encoded in the hardened build,
 * hardening.h), each word 1 = mark | depth (depth is a hint: about the
 * number below it when it was pushed, read without a lock; only the top's
 * is ever read).  A push adds one object or a whole chain, linking the
 * chain's last object to the top it saw.
 * Why ABA cannot hurt: the drain takes the whole chain with one swap and
 * never looks at next pointers while others push; a push only links its
 * object to whatever top it saw and succeeds only if that top is still
 * the top - if the same object became top again in between, linking to it
 * is still correct, because a push depends on the top's identity alone,
 * never on the top's contents.
 */
#ifndef PCM_REMOTE_H
#define PCM_REMOTE_H

#include "heap.h"

/* When a queue gets this deep, the pusher drains it itself if it can take
 * the owner's lock: a CPU that stopped allocating never drains its own. */
#define PCM_REMOTE_HELP_DEPTH 256u

/* obj (of owner's spans) was freed on another CPU. */
void pcm_remote_free(struct pcm_heap *owner, void *obj);

/* The same for a chain of `count` objects first..last (linked by word 0,
 * each already marked free), pushed in one go: the run of owner's objects
 * that another CPU's cache gives back. */
void pcm_remote_free_chain(struct pcm_heap *owner, void *first, void *last, unsigned count);

#endif
