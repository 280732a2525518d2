/*
 * yield_lock.h - a lock for slow paths that are rarely contended: a word,
 * 0 free and 1 held, taken by CAS, the CPU yielded to the holder between
 * tries.  For the heaps' prepare lock and the segment pool's lock; a
 * heap's own lock is tried instead (heap.h), never waited for on an
 * allocation's path.
 */
#ifndef PCM_YIELD_LOCK_H
#define PCM_YIELD_LOCK_H

#include <sched.h>

#include "atomic.h"

static inline void pcm_yield_lock_take(volatile pcm_word_t *lock)
{
    for (;;) {
        pcm_word_t expected = 0;
        /* acquire: what the lock guards, as the last holder left it */
        if (pcm_cas_acquire(lock, &expected, 1))
            return;
        sched_yield();
    }
}

static inline void pcm_yield_lock_give(volatile pcm_word_t *lock)
{
    pcm_store_release(lock, 0);
}

#endif
