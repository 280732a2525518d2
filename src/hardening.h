/*
 * hardening.h - every hook of the hardened build (-DPCM_HARDENED, built as
 * libpcmalloc-hardened.so beside libpcmalloc.so).  In the default build
 * each hook is an identity or an empty inline and compiles to nothing: the
 * default fast path must not grow by one instruction (make bench-quick
 * counts them).
 *
 * What the hardened build adds, and where its state lives:
 *   - free-list links encoded: word 0 of every free object (per-CPU cache,
 *     remote queue, span free list, a private chain) holds
 *     next ^ key ^ (address of the word), key being the owner heap's
 *     secret, copied into each of its segment headers; a link read back is
 *     checked to name a free object of the same heap, so a link the
 *     program overwrote is reported, not followed;
 *   - a free bit per 16-byte unit of each segment, in the segment header
 *     (not in the object, where the program could overwrite it): set
 *     while the object is free (cached, queued, on a span's free list),
 *     cleared when malloc hands it out.  free sets it with a CAS and
 *     aborts if it was set: double frees are caught on every free, even
 *     after the program overwrote the object's free mark;
 *   - freed objects filled with PCM_FILL_BYTE beyond the link and mark
 *     words, checked when malloc hands them out again: a write after free
 *     is reported at the reuse;
 *   - each refill's objects handed out in a random order (per-heap
 *     generator), so the next object's address cannot be predicted;
 *   - guard pages (PROT_NONE) after each segment's header and at its end,
 *     so a linear overflow cannot reach a segment header (the bitmap, the
 *     key) or run from one segment into the next.
 * The hardened build runs the double-width-CAS fast path: the rseq
 * sections are hand-written asm that store links plain (fast_path.c).
 */
#ifndef PCM_HARDENING_H
#define PCM_HARDENING_H

#include "atomic.h"
#include "free_mark.h"
#include "segment.h"

#ifdef PCM_HARDENED
#define PCM_HARDENED_BUILD 1
#else
#define PCM_HARDENED_BUILD 0
#endif

/* At start-up, after the options are read: the default build warns that
 * PCMALLOC_HARDENED / PCMALLOC_SECURE need the hardened library; the
 * hardened build draws its per-heap secrets. */
void pcm_hardening_startup(void);

/* The PCMALLOC_VERBOSE / statistics line saying what this build checks. */
const char *pcm_hardening_summary(void);

#ifdef PCM_HARDENED

/* The filling of a free object: bytes from PCM_FILL_FROM (after the link
 * and mark words of free_mark.h) to its end. */
#define PCM_FILL_BYTE 0xa5u
#define PCM_FILL_FROM ((PCM_FREE_MARK_WIDE ? 3u : 2u) * sizeof(pcm_word_t))

static inline pcm_word_t pcm_link_encode(const void *at, pcm_word_t next)
{
    return next ^ pcm_segment_of(at)->link_key ^ (pcm_word_t)at;
}

static inline pcm_word_t pcm_link_decode(const void *at, pcm_word_t stored)
{
    return stored ^ pcm_segment_of(at)->link_key ^ (pcm_word_t)at;
}

/* True if next is 0 or a free object of the heap owning `at` (hardening.c). */
bool pcm_link_plausible(const void *at, pcm_word_t next);
/* Report a link that is not plausible, then abort. */
_Noreturn void pcm_link_corrupt(const void *at, pcm_word_t next) __attribute__((cold));

/* The next object of a chain no other thread can change (a drained
 * queue, a taken cache, a span's free list under its lock). */
static inline void *pcm_link_next(const void *at, pcm_word_t stored)
{
    pcm_word_t next = pcm_link_decode(at, stored);
    if (__builtin_expect(!pcm_link_plausible(at, next), 0))
        pcm_link_corrupt(at, next);
    return (void *)next;
}

/* free (any call that frees p, a validated small object of span): claim
 * p's free bit, or abort with a double free; then fill p. */
void pcm_hardened_free(const struct pcm_span *span, void *p, const char *call);
/* A check for calls that read a live object (realloc, free_sized,
 * malloc_usable_size): abort with a double free if p is free. */
void pcm_hardened_check_live(void *p, const char *call);
/* obj is about to be handed out: its free bit must be set (else it is on
 * a free list twice), its mark and filling intact (else it was written
 * after free); clears the bit and the link. */
void pcm_hardened_handed_out(void *obj);
/* Objects [first, first + count * size) were just carved: mark them free
 * as a freed object would be (bit, mark, filling). */
void pcm_hardened_carved(uintptr_t first, uint32_t count, uint32_t size);
/* A span was cut from the segment's pages: forget the free bits a span
 * that held them before left there. */
void pcm_hardened_span_created(struct pcm_span *span);
/* A new segment: its key, and its guard pages marked used (the caller
 * then leaves them out of every span).  False (errno ENOMEM) if the
 * pages could not be protected. */
bool pcm_hardened_segment_created(struct pcm_segment *s);
/* Put a refill's chain (count objects, first..last, linked by encoded
 * links) in a random order; the new first and last. */
void pcm_hardened_shuffle(unsigned heap, void **first, void **last, unsigned count);

#else

static inline pcm_word_t pcm_link_encode(const void *at, pcm_word_t next)
{
    (void)at;
    return next;
}

static inline pcm_word_t pcm_link_decode(const void *at, pcm_word_t stored)
{
    (void)at;
    return stored;
}

static inline bool pcm_link_plausible(const void *at, pcm_word_t next)
{
    (void)at;
    (void)next;
    return true;
}

static inline void pcm_link_corrupt(const void *at, pcm_word_t next)
{
    (void)at;
    (void)next;
}

static inline void *pcm_link_next(const void *at, pcm_word_t stored)
{
    (void)at;
    return (void *)stored;
}

static inline void pcm_hardened_free(const struct pcm_span *span, void *p, const char *call)
{
    (void)span;
    (void)p;
    (void)call;
}

static inline void pcm_hardened_check_live(void *p, const char *call)
{
    (void)p;
    (void)call;
}

static inline void pcm_hardened_handed_out(void *obj)
{
    (void)obj;
}

static inline void pcm_hardened_carved(uintptr_t first, uint32_t count, uint32_t size)
{
    (void)first;
    (void)count;
    (void)size;
}

static inline void pcm_hardened_span_created(struct pcm_span *span)
{
    (void)span;
}

static inline bool pcm_hardened_segment_created(struct pcm_segment *s)
{
    (void)s;
    return true;
}

static inline void pcm_hardened_shuffle(unsigned heap, void **first, void **last, unsigned count)
{
    (void)heap;
    (void)first;
    (void)last;
    (void)count;
}

#endif

#endif
