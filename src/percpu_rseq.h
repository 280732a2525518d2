/*
 * percpu_rseq.h - the per-CPU cache operations as restartable sequences
 * (Linux rseq): the fast path when pcm_fast_path == PCM_FAST_PATH_RSEQ.
 *
 * The cache of class c on CPU n is the word pcm_heaps[n].bins[c].cache
 * .half.ptr (the tag half is unused on this path): a LIFO of free objects
 * of class c, linked by word 0, word 1 = mark | depth as in
 * percpu_cache.h.  Unlike the CAS path's, it may hold objects of other
 * heaps' spans: an object of PCM_FOREIGN_CACHED_MIN bytes or more freed
 * on a CPU other than its owner's goes onto the cache of the CPU the
 * thread runs on (the free's slow half, cache_rseq_slow.c); a smaller one
 * onto that CPU's outgoing list of its class (heap.h: a slot like the
 * cache's that malloc never pops).  So a thread the scheduler moved, or
 * a consumer freeing what a producer made, pays no atomic per object.
 * Objects of other heaps leave the cache when it overflows or is
 * flushed, a run at a time, and an outgoing list when it fills or is
 * flushed, a push per owner, onto their owners' remote queues (heap.h:
 * pcm_heap_return_chain_locked, remote.h).
 * Invariant of this path (outgoing slots alike): that word is written
 * only by a thread running on CPU n, inside one of the sections below
 * (the kernel aborts a section the thread leaves the CPU in), so each
 * operation is plain loads and one committing store - no lock prefix, no
 * exclusive pair - or by a drain from another CPU while n's sections are
 * stopped (their limit 0, which every section that needs no heap lock
 * checks) and fenced by membarrier (cache_rseq_slow.c:
 * pcm_heap_drain_caches_rseq_locked).  ABA cannot arise: no other
 * thread can change the slot between a section's load and its commit
 * without the section being aborted.
 * Never mixed with the CAS operations of percpu_cache.h: the path is
 * chosen once, before the first object is cached (fast_path.h).
 *
 * Each arch's arch_rseq.h (x86, x86_64, arm64) supplies, in assembly:
 *   pcm_arch_rseq_pop(obj, slot0, off, empty, aborted) - a statement
 *       that pops into obj or jumps to a label (empty: the cache is, or is
 *       stopped, or the thread has no CPU number: cpu_id -1 or -2 finds
 *       one of the guard heaps below heap 0, whose limits read 0 - with a
 *       heap for every possible CPU, the only condition of this path, no
 *       other cpu_id lies outside the heaps);
 *   pcm_arch_rseq_push(slot0, off, owner, obj, mark, other_cpu, full,
 *       aborted) - a statement that pushes obj or jumps to a label (full:
 *       the bin's limit, PCM_RSEQ_LIMIT_OFFSET above the slot, reached);
 *   pcm_arch_rseq_push_here(slot0, off, &cpus, obj, mark, no_cpu, full,
 *       aborted) - the same on whatever CPU the thread runs on (no_cpu:
 *       the thread has no CPU number below cpus);
 *   pcm_arch_rseq_take_all(slot0, off, owner) -> chain, EMPTY, ABORTED;
 *   pcm_arch_rseq_put_if_empty(slot0, off, owner, chain, refused, aborted)
 *       - a statement that makes a ready chain (links and depths written)
 *       the whole cache if the cache is empty, or jumps to a label;
 * where slot0 is CPU 0's slot of the class, slot n lies n * PCM_RSEQ_STRIDE
 * bytes above it, and off is the rseq area's offset from the thread
 * pointer (glibc's __rseq_offset).  An arch that defines
 * PCM_ARCH_RSEQ_LISTS_END_AT_SLOT (x86_64, i386) keeps an empty list of a
 * ready heap as its slot's own address, and a list's bottom object links
 * there (heap.h: pcm_chain_more): its pop finds a list empty at that
 * address, its take-all leaves it there, its put-if-empty looks for it,
 * and its push on the owner's CPU reads the top's depth untested (the
 * slot's next word, the pair's tag half, reads 0).  That needs a section
 * that reads an open limit to read the slot's address after it, which
 * x86's ordered loads give; arm64's sections load the two unordered, and
 * a heap made ready from another CPU could show them an open limit and
 * its slot still 0, so there an empty list stays 0.  "owner" operations
 * act only when the thread runs on CPU `owner`, so callers can say whose
 * objects they push.
 * The generic arch has none (PCM_ARCH_RSEQ undefined): CAS path only; nor
 * has the hardened build of any arch.
 */
#ifndef PCM_PERCPU_RSEQ_H
#define PCM_PERCPU_RSEQ_H

#include "cpu.h"
#include "fast_path.h"
#include "free_mark.h"
#include "heap.h"

#define PCM_RSEQ_EMPTY ((void *)0)
#define PCM_RSEQ_ABORTED ((void *)1)

#define PCM_RSEQ_STRIDE (sizeof(struct pcm_heap))
/* log2 of the stride: the sections find a CPU's slot with a shift. */
#define PCM_RSEQ_STRIDE_SHIFT __builtin_ctzl(PCM_RSEQ_STRIDE)
_Static_assert((PCM_RSEQ_STRIDE & (PCM_RSEQ_STRIDE - 1)) == 0, "a heap's size is a power of two");
/* From a slot to its bin's limit (a push's bound). */
#define PCM_RSEQ_LIMIT_OFFSET (offsetof(struct pcm_bin, limit))
_Static_assert(offsetof(struct pcm_bin, cache) == 0 && offsetof(pcm_pair_t, half.ptr) == 0,
               "a slot is the first word of its bin");

/* Not in the hardened build: the sections store free-list links plain,
 * and its links are encoded (hardening.h). */
#if defined(__linux__) && __has_include("arch_rseq.h") && !defined(PCM_HARDENED)
#define PCM_PERCPU_RSEQ_INSIDE
#include "arch_rseq.h"
#undef PCM_PERCPU_RSEQ_INSIDE
#endif

#ifdef PCM_ARCH_RSEQ
_Static_assert(PCM_DEPTH_BITS == 16 || PCM_DEPTH_BITS == 12, "arch_rseq.h reads the depth field by width");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the sections read a bin's limit word as its low 32 bits");
_Static_assert(offsetof(struct rseq, cpu_id) == 4 && offsetof(struct rseq, rseq_cs) == 8,
               "arch_rseq.h addresses the rseq area's fields by offset");
#ifdef PCM_ARCH_RSEQ_LISTS_END_AT_SLOT
_Static_assert(offsetof(pcm_pair_t, half.tag) == sizeof(pcm_word_t),
               "an empty list's depth, read as its slot's word 1, is the pair's tag half (0 on this path)");
#endif
#endif

/* CPU 0's cache slot of class cls; CPU n's lies n * PCM_RSEQ_STRIDE above. */
static inline pcm_word_t *pcm_rseq_slot0(size_t cls)
{
    return (pcm_word_t *)&pcm_heaps[0].bins[cls].cache.half.ptr;
}

/* The same, looked up by 16-byte size step up to 1 KiB (sizeclass.h's
 * pcm_class_of_step), so malloc's fast path finds its slot with one load
 * instead of the heaps' address, a shift and an add; free's reads it from
 * the span (segment.h: slot0), on the line of the span's other fields it
 * reads anyway.  Filled by pcm_rseq_slots_init before the fast path is
 * chosen, never changed. */
#ifdef PCM_ARCH_RSEQ
extern pcm_word_t *pcm_rseq_slot0_of_step[PCM_CLASS_TABLE_MAX / 16] __attribute__((visibility("hidden")));
void pcm_rseq_slots_init(void);
#else
static inline void pcm_rseq_slots_init(void) {} /* no rseq path: nothing looks them up */
#endif

/* The same for the outgoing lists (heap.h), which the same sections push
 * and take: a bin of their own, the limit at the same offset. */
static inline pcm_word_t *pcm_rseq_outgoing_slot0(size_t cls)
{
    return (pcm_word_t *)&pcm_heaps[0].outgoing[cls].cache.half.ptr;
}

/* Restarts seen by the C side of the sections (statistics, tests). */
extern volatile pcm_word_t pcm_rseq_aborts __attribute__((visibility("hidden")));
void pcm_rseq_count_abort(void) __attribute__((noinline, cold));

/* The CPU the rseq area names, or -1 when it names none this process has
 * a heap for (rseq not registered for this thread). */
static inline int pcm_rseq_cpu(void)
{
    const volatile struct rseq *area =
        (const volatile struct rseq *)((char *)__builtin_thread_pointer() + pcm_cpu_rseq_offset);
    uint32_t cpu = area->cpu_id;
    return cpu < pcm_heap_count ? (int)cpu : -1;
}

#endif
