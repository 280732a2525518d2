/*
 * free_mark.h - the tag every free object carries in its second word, so
 * that free() of an object that is already free is caught cheaply.
 *
 * While free (in a per-CPU cache, on a remote-free queue or a span's free
 * list) an object's word 1 holds mark(obj) | depth: mark is the object's
 * address mixed with a per-process random secret, its low PCM_DEPTH_BITS
 * left clear for a count the per-CPU cache keeps there.  malloc clears word
 * 1 before handing the object out, so a live object holds the mark only if
 * the program itself wrote that value there - with a secret of the word's
 * width, a chance of about 2^-(word bits - depth bits).
 */
#ifndef PCM_FREE_MARK_H
#define PCM_FREE_MARK_H

#include "atomic.h"

#if UINTPTR_MAX == 0xffffffffu
#define PCM_DEPTH_BITS 12u
#else
#define PCM_DEPTH_BITS 16u
#endif
#define PCM_DEPTH_MASK (((pcm_word_t)1 << PCM_DEPTH_BITS) - 1)

/* Set once at start-up, before any object is freed. */
extern pcm_word_t pcm_free_secret __attribute__((visibility("hidden")));

static inline pcm_word_t pcm_free_mark(const void *obj)
{
    return ((pcm_word_t)obj ^ pcm_free_secret) & ~PCM_DEPTH_MASK;
}

static inline pcm_word_t *pcm_object_word1(void *obj)
{
    return (pcm_word_t *)obj + 1;
}

static inline bool pcm_object_is_marked_free(void *obj)
{
    return (*(volatile pcm_word_t *)pcm_object_word1(obj) & ~PCM_DEPTH_MASK) == pcm_free_mark(obj);
}

#endif
