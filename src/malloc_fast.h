/*
 * malloc_fast.h - malloc's inline fast path: the size-class lookup and one
 * pop from the current CPU's cache, with calls out to the slow paths.
 * api.c's pcm_malloc is this, and preload_cxx.c's operator new is its
 * rseq half, so that C++'s allocations do not pay for a call to malloc:
 * callgrind counted 35 instructions an operator new in
 * bench/cxx_containers when it called malloc, 24 since, as many as a
 * malloc, and 21 since the pop lost its compare of the CPU number
 * (mimalloc's new: 21).  Only for the library's own sources.
 */
#ifndef PCM_MALLOC_FAST_H
#define PCM_MALLOC_FAST_H

#include <stddef.h>

#include "fast_path.h"
#include "free_mark.h"
#include "hardening.h"
#include "heap.h"
#include "init.h"
#include "large.h"
#include "percpu_cache.h"
#include "percpu_rseq.h"
#include "sizeclass.h"

/* With an rseq build the CAS path is a call, so that the rseq fast path's
 * code holds no locked instruction (tests/audit checks); without one it
 * is the fast path and inline. */
#ifdef PCM_ARCH_RSEQ
#define CAS_PATH __attribute__((noinline))
#else
#define CAS_PATH inline __attribute__((always_inline))
#endif

/* A live object never carries the free mark (free_mark.h); the hardened
 * build checks it was not written while free. */
static inline __attribute__((always_inline)) void *handed_out(void *obj)
{
    if (__builtin_expect(obj != NULL, 1)) {
        pcm_hardened_handed_out(obj);
        pcm_free_mark_clear(obj);
    }
    return obj;
}

static CAS_PATH void *small_alloc_cas(unsigned cls)
{
    pcm_ensure_init();
#ifdef PCM_ARCH_RSEQ
    /* A malloc that read the path before start-up had chosen it - the one
     * that ran start-up, and any that came in while it ran - arrives here
     * with the path now chosen.  If it is rseq, the caches are the
     * sections' alone (percpu_rseq.h): this path's CAS pop and its
     * refill's chain push must not touch them.  A section's commit is a
     * plain store that a CAS from another CPU does not see (nor the
     * section the CAS), and the sections keep no tag: a CAS pop of CPU
     * b's cache from CPU a between an rseq pop's load and its commit
     * handed one object out twice, and a stale link committed by either
     * put an object in use back on the cache, its first word (the
     * program's data by then) later followed as a link - objects changed
     * in use, crashes, lists that loop (tests/stress/start_up_race.c:
     * one fresh process in six here; CI's i386 VM: an object of the
     * shared LIFO changed, then a hang).  So the rseq slow half, which
     * refills through the sections. */
    if (pcm_fast_path_is_rseq())
        return pcm_heap_alloc_rseq_slow(cls, PCM_RSEQ_EMPTY);
#endif
    struct pcm_heap *h = pcm_heap_current();
    void *obj = pcm_cache_pop(&h->bins[cls].cache);
    if (__builtin_expect(!obj, 0))
        obj = pcm_heap_alloc_slow(h, cls);
    return handed_out(obj);
}

#ifdef PCM_ARCH_RSEQ
/* The class whose CPU-0 slot slot0 is: worked out on the slow half only,
 * so that the fast one loads nothing but the slot's address. */
static inline unsigned class_of_slot0(const pcm_word_t *slot0)
{
    return (unsigned)(((const char *)slot0 - (const char *)pcm_rseq_slot0(0)) / sizeof(struct pcm_bin));
}

/* The rseq pop from slot0, a class's slot on CPU 0, through the rseq
 * area at `area` from the thread pointer: the enclosing function returns
 * the object, its free mark cleared; an empty or stopped cache goes to
 * label `empty`, a restarted section to label `aborted`. */
#define PCM_RSEQ_POP_RETURN(slot0, area, empty, aborted)                             \
    do {                                                                             \
        void *pcm_obj_;                                                              \
        pcm_arch_rseq_pop(pcm_obj_, slot0, area, empty, aborted);                    \
        pcm_free_mark_clear(pcm_obj_);                                               \
        return pcm_obj_;                                                             \
    } while (0)

static inline __attribute__((always_inline)) void *small_alloc_rseq(pcm_word_t *slot0, ptrdiff_t area)
{
    PCM_RSEQ_POP_RETURN(slot0, area, empty, aborted);
empty:
    return pcm_heap_alloc_rseq_slow(class_of_slot0(slot0), PCM_RSEQ_EMPTY);
aborted:
    return pcm_heap_alloc_rseq_slow(class_of_slot0(slot0), PCM_RSEQ_ABORTED);
}
#endif

/* Both paths end in a tail call or a return, so the fast one needs no
 * stack frame. */
static inline __attribute__((always_inline)) void *small_alloc(unsigned cls)
{
#ifdef PCM_ARCH_RSEQ
    ptrdiff_t area = pcm_fast_path_rseq_area(); /* 0: not (yet) the rseq path */
    if (__builtin_expect(area != 0, 1))
        return small_alloc_rseq(pcm_rseq_slot0(cls), area);
#endif
    return small_alloc_cas(cls);
}

/* The same for a request of at most 1 KiB, by its 16-byte size step. */
static inline __attribute__((always_inline)) void *small_alloc_step(size_t step)
{
#ifdef PCM_ARCH_RSEQ
    ptrdiff_t area = pcm_fast_path_rseq_area();
    if (__builtin_expect(area != 0, 1))
        return small_alloc_rseq(pcm_rseq_slot0_of_step[step], area);
#endif
    return small_alloc_cas(pcm_class_of_step[step]);
}

/* Only the common case of the above, as the body of a function of
 * `size`: a request of at most 1 KiB on the rseq path returns its object,
 * with no call; otherwise the function does `missed` (the request is not
 * that case, or the cache was empty or stopped) or `restarted` (the
 * section was restarted: the restart is to be counted,
 * pcm_rseq_count_abort, as malloc's slow path does), each of which must
 * end in a return.  C++'s operator new is this, then a tail call to its
 * slow half: an operator that held on to its size across a call to a slow
 * path needed a stack frame (3 registers saved and restored: 33
 * instructions a new, against 24 without), and one that took back a
 * sentinel for a restart tested every object for it.  Once in a function:
 * its labels are the function's. */
#ifdef PCM_ARCH_RSEQ
#define PCM_MALLOC_RSEQ_ONLY(size, missed, restarted)                                                      \
    do {                                                                                                    \
        size_t pcm_below_ = (size) - 1;                                                                     \
        ptrdiff_t pcm_area_ = pcm_fast_path_rseq_area();                                                    \
        if (__builtin_expect(pcm_below_ < PCM_CLASS_TABLE_MAX, 1) && __builtin_expect(pcm_area_ != 0, 1)) { \
            PCM_RSEQ_POP_RETURN(pcm_rseq_slot0_of_step[pcm_below_ >> 4], pcm_area_, pcm_missed_,            \
                                pcm_restarted_);                                                            \
        pcm_restarted_:                                                                                     \
            restarted;                                                                                      \
        }                                                                                                   \
    pcm_missed_:                                                                                            \
        missed;                                                                                             \
    } while (0)
#else
#define PCM_MALLOC_RSEQ_ONLY(size, missed, restarted) \
    do {                                              \
        (void)(size);                                 \
        missed;                                       \
    } while (0)
#endif

static inline __attribute__((always_inline)) void *pcm_malloc_inline(size_t size)
{
    /* Up to 1 KiB, one table look-up, with no branch on the size within
     * it: a program of mixed sizes mispredicted a split at 128 bytes often
     * enough to cost lifo and xmalloc at one thread 17 % of their speed.
     * Size 0 wraps around and takes the third branch. */
    size_t below = size - 1;
    if (__builtin_expect(below < PCM_CLASS_TABLE_MAX, 1))
        return small_alloc_step(below >> 4);
    if (__builtin_expect(size <= PCM_SMALL_MAX, 1))
        return small_alloc(size ? pcm_size_class_above_1k(size) : 0);
    return pcm_large_alloc(size, 0, false);
}

#endif
