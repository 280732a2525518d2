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
 * carries a second, full-width mark.  malloc clears word 1 (and word 2 on
 * 32-bit builds) before handing an object out, and no mark is ever those
 * cleared words (pcm_free_secret_from), so a live object looks free only
 * if the program itself wrote the marks: a chance of about 2^-47 (64-bit)
 * or 2^-52 (32-bit).
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

/* 64-bit: the address shifted up past the depth's bits, then mixed, so
 * that the mark needs no mask (the secret's low bits are clear): free's
 * fast path computes it in one instruction fewer.  The 16 address bits
 * shifted out are 0 in user addresses of 48 bits (x86_64's 4-level
 * paging, arm64's usual VA size); above that two objects may share a
 * mark, which is only ever compared with its own object's word.  32-bit:
 * masked, so that all 20 of its bits are the address's. */
static inline pcm_word_t pcm_free_mark(const void *obj)
{
#if UINTPTR_MAX == 0xffffffffu
    return ((pcm_word_t)obj ^ pcm_free_secret) & ~PCM_DEPTH_MASK;
#else
    return ((pcm_word_t)obj << PCM_DEPTH_BITS) ^ pcm_free_secret;
#endif
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

/* The secret to use, from random bits.  malloc clears word 1 (and on
 * 32-bit builds word 2) of every object it hands out (pcm_free_mark_clear),
 * so a cleared word must never read as a mark:
 * - 64-bit: the secret's bit PCM_DEPTH_BITS is set, and the bit the
 *   shift moves there, an object's bit 0, is not (objects are 16-byte
 *   aligned), so every mark has it and none is 0.  The secret's low
 *   PCM_DEPTH_BITS are clear, so the mark's are.
 * - 32-bit: the mark is 0 for objects on the one page the secret's high 20
 *   bits name (a process using a quarter of the address space holds that
 *   page one time in four: a live object there looked double-freed).  Word
 *   2 cleared rules it out: the wide mark is 0 only at the address ~secret,
 *   whose word-1 mark is not 0. */
static inline pcm_word_t pcm_free_secret_from(pcm_word_t random)
{
    return PCM_FREE_MARK_WIDE ? random : (random & ~PCM_DEPTH_MASK) | (PCM_DEPTH_MASK + 1);
}

/* obj is handed out: it no longer reads as free. */
static inline void pcm_free_mark_clear(void *obj)
{
    pcm_word_t *word = obj;
    word[1] = 0;
    if (PCM_FREE_MARK_WIDE)
        word[2] = 0;
}

static inline bool pcm_object_is_marked_free(void *obj)
{
    const volatile pcm_word_t *word = obj;
    return (word[1] & ~PCM_DEPTH_MASK) == pcm_free_mark(obj) &&
           (!PCM_FREE_MARK_WIDE || word[2] == pcm_free_mark_wide(obj));
}

#endif
