/*
 * heap.h - the per-CPU heaps.
 *
 * One heap per possible CPU, picked on each call by the CPU the thread is
 * running on (sched_getcpu; heap 0 if the kernel cannot say).  A thread
 * may be preempted or migrated at any instruction, so nothing assumes the
 * heap belongs to the caller:
 *   - bins[c].cache (percpu_cache.h): free objects of class c from this
 *     heap's spans; lock-free pop and push, the whole fast path;
 *   - remote (remote.h): objects of this heap's spans freed on other CPUs,
 *     a lock-free multi-producer stack that the heap drains whole;
 *   - everything else - bins[c].partial, the spans, the segments - is the
 *     span layer, behind `lock`.  It is only *tried*: a thread that finds
 *     a heap's lock taken goes to another heap, so a holder preempted
 *     inside it delays nobody (see pcm_heap_lock_any).
 */
#ifndef PCM_HEAP_H
#define PCM_HEAP_H

#include "atomic.h"
#include "cpu.h"
#include "segment.h"
#include "sizeclass.h"

struct pcm_bin {
    volatile pcm_pair_t cache;
    struct pcm_span *partial; /* spans that can give objects (lock) */
    /* pcm_bin_shapes[class].limit, copied here at start-up so that a push
     * finds it on the cache line it writes anyway. */
    uint32_t limit;
};

/* The same for every heap, written once at start-up: a table apart from
 * the heaps, so reading it never touches another CPU's cache lines. */
struct pcm_bin_shape {
    uint32_t limit; /* most objects a cache of the class holds */
    uint32_t batch; /* objects moved per refill */
};
extern struct pcm_bin_shape pcm_bin_shapes[PCM_CLASS_COUNT] __attribute__((visibility("hidden")));

struct pcm_heap_stats {
    pcm_word_t served[PCM_CLASS_COUNT];  /* objects moved from spans to the cache */
    pcm_word_t returned[PCM_CLASS_COUNT]; /* objects moved back to spans */
    pcm_word_t remote_drained;
    pcm_word_t refills, flushes, spans_created, spans_released;
};

struct pcm_heap {
    /* Written by other CPUs: a line of its own. */
    volatile pcm_word_t remote;
    char pad_remote[PCM_CACHE_LINE - sizeof(pcm_word_t)];
    volatile pcm_word_t lock;
    unsigned index;
#ifdef PCM_HARDENED
    pcm_word_t link_key;   /* this heap's secret (hardening.h), set at start-up */
    uint64_t random_state; /* the refill shuffle's generator (lock) */
#endif
    struct pcm_segment *segments; /* lock */
    struct pcm_heap_stats stats;  /* lock */
    struct pcm_bin bins[PCM_CLASS_COUNT];
} __attribute__((aligned(PCM_CACHE_LINE)));

extern struct pcm_heap *pcm_heaps __attribute__((visibility("hidden")));
extern unsigned pcm_heap_count __attribute__((visibility("hidden")));

/* Map and set up the heaps (start-up, single caller). False on ENOMEM. */
bool pcm_heaps_init(unsigned count);

/* The heap of the CPU the caller runs on now (PCMALLOC_CPUS may give
 * fewer heaps than CPUs: then CPUs share them round-robin). */
static inline struct pcm_heap *pcm_heap_current(void)
{
    unsigned cpu = pcm_cpu_current();
    if (__builtin_expect(cpu >= pcm_heap_count, 0))
        cpu %= pcm_heap_count;
    return &pcm_heaps[cpu];
}

/* ---- the fast path's slow halves, one pair per fast path ---- */

/* CAS path (cache_cas_slow.c).  Cache empty: take objects from h's spans
 * (or, if h's lock is busy, another heap's), return one and leave the rest
 * in that heap's cache.  NULL with errno == ENOMEM when memory is
 * exhausted. */
void *pcm_heap_alloc_slow(struct pcm_heap *h, unsigned cls) __attribute__((noinline, cold));
/* CAS path.  Cache full: give some of h's cached objects of class cls back
 * to their spans, then cache obj (an object of h's spans). */
void pcm_heap_free_slow(struct pcm_heap *h, unsigned cls, void *obj) __attribute__((noinline, cold));

/* rseq path (cache_rseq_slow.c).  The pop answered `seen` (EMPTY or
 * ABORTED, percpu_rseq.h): retry, refill this CPU's cache, or - for a
 * thread the kernel gives no CPU number - take one object under a lock.
 * The object comes ready to hand out (word 1 cleared); NULL with errno ==
 * ENOMEM when memory is exhausted. */
void *pcm_heap_alloc_rseq_slow(unsigned cls, void *seen) __attribute__((noinline, cold));
/* rseq path.  The push of obj (a valid small object) did not happen: */
enum pcm_rseq_free_reason {
    PCM_RSEQ_FREE_OTHER_CPU, /* not on the owner heap's CPU (or no CPU number) */
    PCM_RSEQ_FREE_FULL,      /* that CPU's cache was full */
    PCM_RSEQ_FREE_ABORTED,   /* the section was restarted */
};
void pcm_heap_free_rseq_slow(void *obj, enum pcm_rseq_free_reason why) __attribute__((noinline, cold));

/* Empty the per-CPU caches into their spans, for malloc_trim: every CPU's
 * on the CAS path; on the rseq path, where only a thread on a CPU may
 * touch its cache, the caller visits each CPU it is allowed on (its
 * affinity is restored afterwards).  One of the two files below. */
void pcm_heap_flush_caches_cas(void);
void pcm_heap_flush_caches_rseq(void);

/* ---- the span layer (heap.c); `_locked`: with that heap's lock ---- */

/* Return every object on h's remote queue to its span. */
void pcm_heap_drain_remote_locked(struct pcm_heap *h);
/* Cut up to `want` objects of class cls from h's spans (making spans, and
 * segments, as needed) into a chain linked by word 0: *first ... *last.
 * Returns how many (0: out of memory).  Fresh objects carry no free mark
 * (in the hardened build they do, and the chain comes shuffled). */
unsigned pcm_heap_cut_locked(struct pcm_heap *h, unsigned cls, unsigned want, void **first, void **last);
/* obj, an object of one of h's spans, goes back to its span. */
void pcm_heap_return_locked(struct pcm_heap *h, void *obj);
/* The same for every object of a chain linked by word 0 (NULL: none). */
void pcm_heap_return_chain_locked(struct pcm_heap *h, void *chain);
/* Give back every span of h with no object out (after draining h's
 * remote queue) and decommit the free pages of h's segments; the bytes
 * given back to the OS.  Objects in per-CPU caches keep their spans. */
size_t pcm_heap_trim_locked(struct pcm_heap *h);
/* Give back every span of h with no object out, also the one a bin keeps
 * to avoid cutting a new span on every refill (trim and decay ticks). */
void pcm_heap_release_empty_spans_locked(struct pcm_heap *h);
/* h's lock if free, else the first free one of the others (waiting when
 * all are busy); the heap it locked. */
struct pcm_heap *pcm_heap_lock_any(struct pcm_heap *h);

/* Test-only fault (see tests/stress): while non-zero, every refill puts
 * its first object into the cache as well as returning it, so the object
 * is handed out twice - a deliberately broken free list that the stress
 * tests must catch.  Read only on the refill path.  Never set in a
 * release build's normal run: nothing but a test writes it. */
extern int pcm_fault_duplicate_refill __attribute__((visibility("hidden")));

bool pcm_heap_trylock(struct pcm_heap *h);
/* Wait for h's lock (yielding the CPU to its holder): only where a caller
 * must have this heap - fork, malloc_trim - never on an allocation path. */
void pcm_heap_lock(struct pcm_heap *h);
void pcm_heap_unlock(struct pcm_heap *h);
/* For fork: take (and give back) every heap's lock. */
void pcm_heaps_lock_all(void);
void pcm_heaps_unlock_all(void);

#endif
