/*
 * decay.h - memory that stayed free goes back to the OS after
 * PCMALLOC_PURGE_DELAY milliseconds, with no thread of its own by default:
 * every refill and flush and every large allocation and free call
 * pcm_decay_maybe first, and once per delay one of them runs a tick over
 * every heap whose lock it can take; the large cache (large_cache.h) has a
 * tick of its own, once per PCMALLOC_LARGE_CACHE_DELAY (shorter by
 * default: a buffer reused in a loop is taken again at once).  A page is
 * decommitted at the first tick that finds it free (in no span) and
 * touched, as the tick before did (pcm_segment_decay) - so it stayed free
 * for at least one period, at most two; so is a cached large mapping (of
 * its tick's periods), and so are the free pages of a span still in use
 * that nothing was cut from or given back to since the tick before.  After
 * a quiet period - no such call for a whole delay, a call lasting until
 * its tick is done - all of that goes back at the first call, since
 * nothing can have changed meanwhile.  A heap
 * with no refill and no flush for a whole period has its CPU's caches
 * emptied into their spans first (pcm_decay_drain_caches_locked), so a CPU
 * no thread uses any more does not keep their spans; after a quiet period
 * every heap has, so the objects a phase freed last do not keep theirs.  A
 * program that stops calling malloc and free keeps its pages until
 * malloc_trim(0) or its next slow path - unless PCMALLOC_PURGE_THREAD=1
 * runs the ticks on a thread of their own as well (purge_thread.h).
 */
#ifndef PCM_DECAY_H
#define PCM_DECAY_H

#include <stdbool.h>

#include "atomic.h"

struct pcm_heap;

/* Cheap when no tick is due: a clock read and a compare.  Call with no
 * heap lock held, at the start of every slow path that changes the spans
 * or the large cache (refill, flush, large malloc and free).  errno is
 * left as it was. */
void pcm_decay_maybe(void);

/* The same ticks from the purge thread (purge_thread.h): not a call of
 * the program's, so a quiet period goes on through it. */
void pcm_decay_background(void);

/* Ticks run since start-up, and of them those after a quiet period (tests). */
extern volatile pcm_word_t pcm_decay_ticks __attribute__((visibility("hidden")));
extern volatile pcm_word_t pcm_decay_quiet_ticks __attribute__((visibility("hidden")));

/* Heap `growing` (its lock held) is about to commit pages it does not
 * have: at most once every 5 ms, one heap of a CPU that had no refill for
 * 5 ms gives back what it has no use for - its remote frees
 * drained, its empty spans released, the pages in no span decommitted
 * (heap.h: pcm_heap_reclaim_locked) - without waiting for the purge
 * delay.  So when the scheduler moves a thread to another CPU, the memory
 * it freed on the old CPU's heap goes back to the OS as the new CPU's
 * heap grows, rather than a second copy of the thread's footprint staying
 * resident for a delay: make bench's tree, its CPU switched every 250 ms,
 * peaked at 75.8 MB without this and 47.3 MB with it (40.0 unmoved).
 * 5 ms, not longer: the tree builds its 38 MB in about 25 ms, so with 50
 * the old heap counted as idle only once the new one had grown in full.
 * Its flushes do not count: a CPU whose threads only free, as a
 * consumer's do, takes nothing from its spans, and what they free there
 * goes back too - make bench's xmalloc at 2 threads, whose producer the
 * scheduler sometimes moved, peaked at 4.0-4.4 MB in 4 of 21 runs (1 of 21
 * with this; 2.9-3.3 MB otherwise), and tests/stress/cpu_move.c's
 * consumer kept a whole 64 MiB phase resident.
 * Only a heap committing new pages calls it - a program whose footprint
 * holds steady never does - and it takes no cached object and no span in
 * use, so a CPU whose threads live in their caches for a while loses only
 * pages it was not using (0 to 1 of these a run in larson and mixed sizes
 * at 2 and 16 threads, threadtest and cache-thrash at 2 and lifo at 16, 0
 * to 4 in xmalloc and C++ containers at 8, 3 to 9 in xmalloc at 2).  Only
 * locks that are free are taken; errno is left as it was. */
void pcm_decay_reclaim(struct pcm_heap *growing);

/* h's CPU's caches (and outgoing lists) into the spans, from any CPU,
 * h's lock held: the fast path's own drain (heap.h).  False if nothing
 * was taken. */
bool pcm_decay_drain_caches_locked(struct pcm_heap *h);

#endif
