/*
 * tests/harness/churn.h - a round that keeps a heap refilling and
 * flushing: 64 objects of one class of 2..4 KiB, more than a cache of
 * those classes holds (32 at most), malloc'd and freed, then the next
 * class.  Shared by the tests that need a heap busy on its slow paths
 * (tests/unit/decay.c, tests/stress/cpu_move.c).
 */
#ifndef PCM_TEST_CHURN_H
#define PCM_TEST_CHURN_H

#include <stddef.h>

#include "pcmalloc.h"

#define PCM_CHURN_FIRST ((size_t)2048)

/* One round at `size`; the size of the next. */
static inline size_t pcm_test_churn_round(size_t size)
{
    void *objects[64];
    for (int i = 0; i < 64; i++)
        objects[i] = pcm_malloc(size);
    for (int i = 0; i < 64; i++)
        pcm_free(objects[i]);
    return size >= 4096 ? PCM_CHURN_FIRST : size + 256;
}

#endif
