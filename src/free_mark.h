/*
 * free_mark.h - the tag every free object carries, so that free() of an
 * object that is already free is caught cheaply.
 *
 * While free (in a per-CPU cache, on a remote-free queue or a span's free
 * list) an object's word 1 holds mark(obj) | depth: mark is the object's
 * address mixed with a per-process random secret, its low PCM_DEPTH_BITS
 * left clear for a count the caches keep there.  On 32-bit builds that
 * leaves only 20 bits of mark - program data would match it once in a
 * million frees - so word 2 (every object has 16 bytes: four words there)
 * carries a second, full-width mark.  malloc clears word 1 before handing
 * an object out, so a live object looks free only if the program itself
 * wrote both marks: a chance of about 2^-48 (64-bit) or 2^-52 (32-bit).
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

#define PCM_FREE_MARK_WIDE (UINTPTR_MAX == 0xffffffffu)

static inline pcm_word_t pcm_free_mark_wide(const void *obj)
{
    return ~((pcm_word_t)obj ^ pcm_free_secret);
}

static inline pcm_word_t *pcm_object_word1(void *obj)
{
    return (pcm_word_t *)obj + 1;
}

/* Mark obj free, with `depth` in the low bits of word 1. */
static inline void pcm_free_mark_set(void *obj, pcm_word_t depth)
{
    pcm_word_t *word = obj;
    word[1] = pcm_free_mark(obj) | depth;
    if (PCM_FREE_MARK_WIDE)
        word[2] = pcm_free_mark_wide(obj);
}

static inline bool pcm_object_is_marked_free(void *obj)
{
    const volatile pcm_word_t *word = obj;
    return (word[1] & ~PCM_DEPTH_MASK) == pcm_free_mark(obj) &&
           (!PCM_FREE_MARK_WIDE || word[2] == pcm_free_mark_wide(obj));
}

#endif
