/*
 * fast_path.h - which per-CPU fast path this process runs, chosen once at
 * start-up (pcm_fast_path_choose) and never changed afterwards: the
 * restartable-sequence path and the double-width-CAS path must never act
 * on the same caches, so the choice is made before the first object is
 * cached.
 */
#ifndef PCM_FAST_PATH_H
#define PCM_FAST_PATH_H

#include "atomic.h"

enum pcm_fast_path {
    PCM_FAST_PATH_CAS = 0, /* lock-free pop/push by double-width CAS */
    PCM_FAST_PATH_RSEQ,    /* restartable sequences: plain loads and stores */
};

/* An enum pcm_fast_path, written once by pcm_fast_path_choose as the last
 * step of start-up (release).  Reading PCM_FAST_PATH_RSEQ with acquire
 * therefore also says start-up is complete: the rseq fast path needs no
 * other check. */
extern volatile pcm_word_t pcm_fast_path __attribute__((visibility("hidden")));

/* Decide from the options, the kernel and the C library (init.c). */
void pcm_fast_path_choose(void);

static inline bool pcm_fast_path_is_rseq(void)
{
    return pcm_load_acquire(&pcm_fast_path) == PCM_FAST_PATH_RSEQ;
}

/* The rseq area's offset from the thread pointer (cpu.h) once the path is
 * PCM_FAST_PATH_RSEQ, else 0 - never an rseq area's offset, which is the
 * thread control block's.  Written with release just before pcm_fast_path,
 * so malloc's acquire load of it is at once its test of the path, its
 * test that start-up is complete, and the offset its section needs. */
extern volatile pcm_word_t pcm_fast_path_rseq_offset __attribute__((visibility("hidden")));

static inline ptrdiff_t pcm_fast_path_rseq_area(void)
{
    return (ptrdiff_t)pcm_load_acquire(&pcm_fast_path_rseq_offset);
}

/* The same value, an ordinary variable: written before pcm_fast_path
 * (whose release store publishes it), for readers that know start-up is
 * complete because an object exists.  That object was made after start-up
 * and reached the reader through a happens-before chain, so a plain read
 * sees the final value - and, not being volatile, compiles to one compare
 * with memory. */
extern pcm_word_t pcm_fast_path_settled __attribute__((visibility("hidden")));

static inline bool pcm_fast_path_is_rseq_after_start(void)
{
    return pcm_fast_path_settled == PCM_FAST_PATH_RSEQ;
}

/* A short name for statistics and PCMALLOC_VERBOSE: "rseq" or "cas". */
static inline const char *pcm_fast_path_name(void)
{
    return pcm_fast_path_is_rseq() ? "rseq" : "cas";
}

/* Sections restarted since start-up (rseq path; statistics, tests). */
pcm_word_t pcm_fast_path_restarts(void);

/* Why the fast path is what it is, one line (e.g. "PCMALLOC_RSEQ=0"). */
const char *pcm_fast_path_reason(void);

#endif
