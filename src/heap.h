/*
 * heap.h - the per-CPU heaps.
 *
 * One heap per possible CPU, picked on each call by the CPU the thread is
 * running on (sched_getcpu; heap 0 if the kernel cannot say).  A thread
 * may be preempted or migrated at any instruction, so nothing assumes the
 * heap belongs to the caller:
 *   - bins[c].cache (percpu_cache.h): free objects of class c from this
 *     heap's spans (on the rseq path, percpu_rseq.h: objects of
 *     PCM_FOREIGN_CACHED_MIN bytes and more from any heap's); lock-free
 *     pop and push, the whole fast path;
 *   - outgoing[c] (rseq path only, percpu_rseq.h): objects of class c
 *     below PCM_FOREIGN_CACHED_MIN bytes from other heaps' spans, freed on
 *     this CPU; never handed out here, sent home a batch at a time;
 *   - remote and remote_class[c] (remote.h): objects of this heap's spans
 *     freed on other CPUs, lock-free multi-producer stacks that the heap
 *     takes whole - a class's by its next refill of the class (rseq path),
 *     into the cache - and drains into its spans;
 *   - everything else - bins[c].partial, the spans, the segments - is the
 *     span layer, behind `lock`.  It is only *tried*: a thread that finds
 *     a heap's lock taken goes to another heap, so a holder preempted
 *     inside it delays nobody (see pcm_heap_lock_any).
 *
 * Lazy: a heap is all zeroes until a thread allocates or frees through
 * it, and a heap no thread used is never written, nor read, by anyone.
 * Its pages of the heaps mapping stay uncommitted, so PCMALLOC_CPUS=256
 * on a machine that runs a few allocating CPUs costs a few heaps of
 * memory.  Zeroes are a safe state for the fast paths: an empty cache
 * sends a pop to its slow half, and a limit of 0 sends a push to its
 * slow half, and both make the heap ready first (pcm_heap_prepare: from
 * pcm_heap_lock_any for a refill, from the rseq flush for a push onto the
 * cache of a CPU no thread allocated on).  The bins' limits are written
 * then.  Every visitor of all heaps
 * (decay, trim, statistics, fork, malloc_info) skips heaps that are not
 * ready, which it learns from a bitmap outside the heaps (pcm_heap_ready).
 */
#ifndef PCM_HEAP_H
#define PCM_HEAP_H

#include "atomic.h"
#include "cpu.h"
#include "segment.h"
#include "sizeclass.h"

/* An object below PCM_FOREIGN_CACHED_MIN bytes freed on a CPU other than
 * its owner's waits on that CPU's outgoing list of its class, never
 * handed out there, and goes home in a batch, one remote push per owner:
 * a list holds at most PCM_OUTGOING_LIMIT objects, or fewer when they
 * would come to more than PCM_OUTGOING_BYTES (pcm_bin_shape.outgoing),
 * and its limit follows its use (pcm_heap_outgoing_sent).  Handing them
 * out where they were freed cost twice over: neighbours on one cache line
 * written by two CPUs (cache-scratch and cache-thrash at 4 threads, twice
 * as slow), and a foreign object, once handed out, takes the free's slow
 * half again at each later free there (larson at 2 threads, objects of
 * 16..400 bytes: 4.9e7 replacements/s with those of 128 bytes and up
 * cached, 7.8e7 with all sent home).  Without that slow half - classes
 * of whole cache lines (64, 128, 192 ... bytes) pushed onto the cache of
 * any CPU by free's fast path itself - larson at 2 threads still fell
 * from 1.20e8 to 0.88e8, though lifo with 64-byte objects rose from 3.2e6
 * to 3.4e6 (tcmalloc's 3.4e6; medians of 5).  Larger objects go into the
 * cache of the CPU that freed them, where their lines are warm and the
 * slow half is small beside the program's use of them (mixed sizes at 16
 * threads: 3.4e6 ops/s with them sent home, 4.3e6 cached). */
#define PCM_FOREIGN_CACHED_MIN 1024u
/* The classes below that size: 16..128 in 16-byte steps, then 8 per
 * doubling (sizeclass.h); checked by tests/unit/fast_path.c. */
#define PCM_OUTGOING_CLASSES 31u
#define PCM_OUTGOING_LIMIT 32u
/* 4 KiB instead (lists of 9 objects of 416 bytes, not 32) lowered larson's
 * committed peak at 2 threads from 1384 to 1248 KiB (medians of 5) but its
 * peak RSS only from 3,140 to 3,080 KiB (medians of 9), and in make
 * bench-compare (medians of 5) xmalloc at 4 and 8 threads went from 0.78
 * and 0.73 of the best peer's time to 0.92 and 1.05 (11 runs at 4 threads
 * before it had shown no loss): more, smaller sends onto the owners'
 * remote stacks, for little RSS. */
#define PCM_OUTGOING_BYTES (16u * 1024u)

struct pcm_bin {
    volatile pcm_pair_t cache;
    struct pcm_span *partial; /* spans that can give objects (lock) */
    /* Most objects the list holds now, on the cache line a push writes
     * anyway: its shape's start at first, then fitted to its use
     * (pcm_heap_flushed_locked); 0 while a drain from another CPU has the
     * list stopped (rseq path, heap lock held).  A word, read and written
     * relaxed (pcm_bin_limit): the fast path reads it as a bound only, so
     * any value a writer stored will do; the rseq sections read its low 32
     * bits (little-endian builds only). */
    volatile pcm_word_t limit;
};

static inline uint32_t pcm_bin_limit(const struct pcm_bin *bin)
{
    return (uint32_t)pcm_load_relaxed(&bin->limit);
}

static inline void pcm_bin_set_limit(struct pcm_bin *bin, uint32_t limit)
{
    pcm_store_relaxed(&bin->limit, limit);
}

/* The same for every heap, written once at start-up: a table apart from
 * the heaps, so reading it never touches another CPU's cache lines. */
struct pcm_bin_shape {
    uint32_t limit; /* most objects a cache of the class ever holds */
    uint32_t start; /* its limit until it proves too small (pcm_heap_flushed_locked) */
    uint32_t outgoing; /* the most an outgoing list holds (classes that have one) */
    uint32_t outgoing_start; /* its limit at first, and the least (pcm_heap_outgoing_sent) */
    uint32_t stand_ins_end; /* pcm_big_stand_ins_end */
};
extern struct pcm_bin_shape pcm_bin_shapes[PCM_CLASS_COUNT] __attribute__((visibility("hidden")));

struct pcm_heap_stats {
    pcm_word_t served[PCM_CLASS_COUNT];  /* objects moved from spans to the cache */
    pcm_word_t returned[PCM_CLASS_COUNT]; /* objects moved back to spans */
    pcm_word_t remote_drained;
    pcm_word_t refills, flushes, spans_created, spans_released;
    /* Spans of each class now, and this heap's most of them.  Here, not in
     * a global counter: span cuts and releases come at the rate objects
     * of a big class do, and a shared atomic cost each a locked
     * instruction on a line all CPUs write.  (32 bits: a heap's spans of
     * one class fill at most 16 TiB.) */
    uint32_t spans[PCM_CLASS_COUNT], peak_spans[PCM_CLASS_COUNT];
    pcm_word_t drains; /* the caches emptied by decay from another CPU */
    pcm_word_t reclaims; /* free memory given back while another CPU grew (decay.c) */
};

/* A remote-free stack (remote.h): its top, and the depth the last push
 * gave its top - which the next push reads, not the top's word 1: a top
 * seen may have been taken and its segment unmapped meanwhile. */
struct pcm_remote_stack {
    volatile pcm_word_t top;
    volatile pcm_word_t depth_hint;
};

struct pcm_heap {
    /* Written by other CPUs: lines of their own (remote.h).  remote holds
     * objects of PCM_FOREIGN_CACHED_MIN bytes and more; remote_class[c]
     * those of class c, which a refill of c on the rseq path takes
     * straight into the cache. */
    struct pcm_remote_stack remote;
    struct pcm_remote_stack remote_class[PCM_OUTGOING_CLASSES];
    _Alignas(PCM_CACHE_LINE) volatile pcm_word_t lock;
#ifdef PCM_HARDENED
    uint64_t random_state; /* the refill shuffle's generator (lock; hardening.c) */
#endif
    struct pcm_segment *segments; /* lock */
    /* Segments on that list (lock; read without it by malloc_info). */
    volatile pcm_word_t segment_count;
    /* Where a span last went back, while a segment may have spare pages;
     * NULL once a search found none (lock; heap.c). */
    struct pcm_segment *spare_hint;
    struct pcm_heap_stats stats;  /* lock */
    pcm_word_t activity_at_tick;  /* refills + flushes at the last decay tick (lock) */
    /* Bumped by every refill (lock), read by other CPUs without it:
     * whether this CPU still allocates (decay.c, pcm_decay_reclaim).  Its
     * flushes do not count: a CPU whose threads only free (a consumer's)
     * takes nothing from its spans, so what they free there can go back. */
    volatile pcm_word_t activity;
    /* The reclaim run's own (decay.c: written only while its flag is
     * held): activity when it last looked, and when it first saw that value. */
    pcm_word_t reclaim_activity, reclaim_seen_ms;
    uint8_t adapt[PCM_CLASS_COUNT]; /* each cache's recent refills and flushes (lock; heap.c) */
    /* For each cache of a class below PCM_FOREIGN_CACHED_MIN bytes: when
     * its latest streak of refills or flushes began (ns, mod 2^32), and
     * that streak (lock; heap.c: streak_event). */
    uint32_t event_ns[PCM_OUTGOING_CLASSES];
    uint8_t streak[PCM_OUTGOING_CLASSES];
    /* When each outgoing list was last sent home full: the same, mod the
     * word (read and written relaxed, without the lock: any thread that
     * sent it stores a time close enough). */
    volatile pcm_word_t outgoing_sent_ns[PCM_OUTGOING_CLASSES];
    struct pcm_bin bins[PCM_CLASS_COUNT]; /* limits: by pcm_heap_prepare, and by a drain */
    struct pcm_bin outgoing[PCM_OUTGOING_CLASSES]; /* the same; partial unused */
} __attribute__((aligned(PCM_PAGE_SIZE)));
/* Page-aligned and a whole number of pages, so that a heap never shares a
 * page with another: making one heap ready commits none of its
 * neighbours' pages (8 KiB a heap on 64-bit and 32-bit builds). */
_Static_assert(sizeof(struct pcm_heap) % PCM_PAGE_SIZE == 0, "a heap is whole pages");

/* The most heaps: a span keeps its owner's index in 16 bits, and the
 * x86_64 rseq free compares it with cpu_id's low 16 bits, where the
 * kernel's negative ones (-1, -2) read 0xffff and 0xfffe.  A machine with
 * more CPUs than this (the kernel allows 8192) runs on the CAS path, its
 * CPUs sharing heaps. */
#define PCM_HEAPS_MAX 16384u

/* Below heap 0 lie this many heaps' room that is never written, so its
 * limits read 0: heaps -1 and -2, where the rseq pop lands for a thread
 * whose cpu_id is -1 or -2 (no CPU number: percpu_rseq.h), and finds a
 * stopped cache, without a compare of its own. */
#define PCM_HEAP_GUARDS 2u

extern struct pcm_heap *pcm_heaps __attribute__((visibility("hidden")));
extern unsigned pcm_heap_count __attribute__((visibility("hidden")));
/* Bit i of the bitmap: heap i is ready (its limits written).  Set once,
 * with release, never cleared; its own page(s) of the heaps mapping. */
extern volatile pcm_word_t *pcm_heap_ready __attribute__((visibility("hidden")));

/* Map the heaps (start-up, single caller); nothing in them is written
 * until each is first used.  False on ENOMEM. */
bool pcm_heaps_init(unsigned count);

static inline unsigned pcm_heap_index(const struct pcm_heap *h)
{
    return (unsigned)(h - pcm_heaps);
}

/*
 * Where a chain of free objects ends.  Everywhere 0, except on the rseq
 * path of an arch whose sections end a per-CPU list at its own slot
 * (arch_rseq.h: PCM_ARCH_RSEQ_LISTS_END_AT_SLOT, x86_64 and i386): there
 * an empty cache or outgoing list of a ready heap holds its slot's
 * address, and the bottom object of one links there, so the free's push
 * reads the top's depth with no test for an empty list.  Set before
 * the first segment is made (fast_path.c), with every ready heap's lists
 * made so (pcm_heaps_end_lists_at_slots); a heap made ready later gets
 * them so before its limits open (heap.c).  Every walk of a chain that
 * came from a list, or may go into one, stops at pcm_chain_more.
 */
extern bool pcm_lists_end_at_slots __attribute__((visibility("hidden")));
void pcm_heaps_end_lists_at_slots(void);

/* A slot: a word of the heaps' mapping, which holds no object. */
static inline bool pcm_in_heaps(const void *p)
{
    return (uintptr_t)p - (uintptr_t)pcm_heaps < (uintptr_t)pcm_heap_count * sizeof(struct pcm_heap);
}

/* p, a link of a chain, is an object, not the chain's end. */
static inline bool pcm_chain_more(const void *p)
{
    return p && !pcm_in_heaps(p);
}

/* What the list holds when empty, and so where a chain that is to become
 * it whole ends (the link of its bottom object). */
static inline pcm_word_t pcm_list_end(const volatile pcm_pair_t *list)
{
    return pcm_lists_end_at_slots ? (pcm_word_t)&list->half.ptr : 0;
}

/* The same for h's cache of class cls. */
static inline pcm_word_t pcm_heap_list_end(struct pcm_heap *h, unsigned cls)
{
    return pcm_list_end(&h->bins[cls].cache);
}

/* Whether the list holds an object: a hint, read without its owner's
 * sections or lock (another thread may change it the next moment), that
 * spares a walk over empty lists their take-alls. */
static inline bool pcm_bin_listed_hint(const struct pcm_bin *bin)
{
    return pcm_chain_more((const void *)pcm_load_relaxed(&bin->cache.half.ptr));
}

/* Whether heap i has been made ready.  acquire: pairs with the release in
 * pcm_heap_prepare_slow, so a ready heap's limits are visible. */
static inline bool pcm_heap_is_ready(unsigned i)
{
    return (pcm_load_acquire(&pcm_heap_ready[i / PCM_WORD_BITS]) >> (i % PCM_WORD_BITS)) & 1u;
}

/* Write h's limits and mark it ready, once (start-up of one heap). */
void pcm_heap_prepare_slow(struct pcm_heap *h) __attribute__((noinline, cold));
static inline void pcm_heap_prepare(struct pcm_heap *h)
{
    if (__builtin_expect(!pcm_heap_is_ready(pcm_heap_index(h)), 0))
        pcm_heap_prepare_slow(h);
}

/* The index of the heap of the CPU the caller runs on now: the CPU number
 * itself, the only mapping the rseq path can use (its sections index the
 * heaps by the kernel's cpu_id).  PCMALLOC_CPUS above the CPU count leaves
 * the heaps of CPU numbers the machine lacks idle; below it, CPUs share
 * heaps round-robin (and the CAS path runs). */
static inline unsigned pcm_heap_current_index(void)
{
    unsigned cpu = pcm_cpu_current();
    if (__builtin_expect(cpu >= pcm_heap_count, 0))
        cpu %= pcm_heap_count;
    return cpu;
}

static inline struct pcm_heap *pcm_heap_current(void)
{
    return &pcm_heaps[pcm_heap_current_index()];
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
/* rseq path.  The push of obj (a valid small object) onto its owner's
 * CPU's cache did not happen: */
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
/* Empty h's CPU's caches (on the rseq path its outgoing lists too) into
 * the spans and the owners' remote queues from any CPU, h's lock held:
 * decay does it to a CPU whose heap stayed idle for a purge delay.  On
 * the rseq path it stops that CPU's sections and fences them with
 * membarrier (cache_rseq_slow.c).  False if nothing was taken (nothing
 * cached, or no fence in this kernel). */
bool pcm_heap_drain_caches_cas_locked(struct pcm_heap *h);
bool pcm_heap_drain_caches_rseq_locked(struct pcm_heap *h);

/* ---- each cache's limit, fitted to its use (heap.c; h's lock) ---- */

/* A cache starts at its shape's `start` and is resized where a streak of
 * its refills (those that cut objects from the spans) turns into a flush:
 *   - a class of 1 KiB or more: it doubles (up to `limit`) at each such
 *     turn - the program's batches of the class go out and come back in
 *     more than the cache holds;
 *   - a class below PCM_FOREIGN_CACHED_MIN bytes (heap.c: streak_event):
 *     it doubles if the streak was long (STREAK_LONG, 3 refills) or began
 *     soon before the flush (within GROW_NS_PER_OBJECT, 250 ns, for each
 *     object of a batch), and halves (not below `start`) otherwise.
 *     Batches that outgrow the cache make long streaks - a producer and a
 *     consumer taking turns on one CPU too, a time slice apart - or quick
 *     turns once the cache nearly holds them; a class allocated and freed
 *     at random drifts between empty and full in short streaks, far apart,
 *     and a cache grown for it would only hold idle objects, on each CPU,
 *     for each class, to save refills and flushes that were rare anyway.
 *     The clock is read once a streak, where it begins.  A refill from
 *     the CPU's remote stack is not counted: it may fill the cache to the
 *     brim, so the flush right after it says nothing of the cache's size.
 * Flushes in a row with no refill between (16) halve it too: objects only
 * come back, and a large cache would only hold them longer - colder, so
 * that the flush, which walks them, misses the cache on each.  A limit of
 * 0 (stopped by a drain, cache_rseq_slow.c) is left alone.
 * Larson (random objects of 16..400 bytes replaced at random, 1,000 live a
 * thread) when every turn grew the cache: its larger classes' caches at
 * their 64 KiB, 1,100-1,400 objects (230-270 KiB) cached on each CPU at 2
 * threads; with the streaks, and the outgoing lists' limits following
 * their use as well (pcm_heap_outgoing_sent), the committed peak at 2
 * threads fell from 1,260-1,384 KiB to 972-1,152 (most of that the
 * outgoing lists'), at one thread (pinned) from 520 to 496 (`malloc_stats`,
 * 3-5 runs each, 2026-12-05), for refills and flushes by the tens of
 * thousands a run where there were hundreds (README: "What limits the
 * gaps").  A long streak of 4 refills instead of 3 took the one thread's
 * peak to 488 KiB, for lifo at one thread 3 % slower; of 2, the caches
 * grew as before (528 KiB).  Timed from
 * the refill alone, the rule held the caches of xmalloc with 4 threads on
 * one CPU at their start (a time slice between a producer's refills and a
 * consumer's flushes), 14 % slower; resizing at turns from flushes to
 * refills too raised the tree's committed peak from 38.1 to 41.8 MB (its
 * destroy and rebuild cut new spans while the old ones waited in grown
 * caches); and for the classes of 1 KiB and more, whose caches start at 1
 * to 7 objects, halving held mixed sizes with 4 threads on one CPU at 3.77
 * against 4.39 M replacements/s (medians of 7).
 *
 * A big class's cache (one object to a span, sizeclass.c) never shrinks:
 * its limits are small, so a flush walks few objects, and each object a
 * flush sends back is a span released, to be cut again at the next
 * refill.  A program that takes out and gives back batches larger than
 * the cache holds grows it once a round and flushed 16 times in a row
 * after that, so it halved the cache as often as it grew and kept it at
 * one object: batches of 100 objects of 20,000 bytes ran at 8.4 M
 * objects/s, 15.6 M with the cache at its 12 (`threadtest threads=1
 * objects=2000000 batch=100 size=20000`, pinned; mimalloc 46.9 M,
 * tcmalloc 81.4 M). */
void pcm_heap_refilled_locked(struct pcm_heap *h, unsigned cls, bool cut);
/* Every list's limit to its start (open: a heap made ready, a drain done;
 * the caches' refill and flush history forgotten too) or to 0 (stopped,
 * for a drain). */
void pcm_heap_set_limits(struct pcm_heap *h, bool open);
void pcm_heap_flushed_locked(struct pcm_heap *h, unsigned cls);
/* h's CPU's outgoing list of class cls (below PCM_OUTGOING_CLASSES) was
 * full and has been sent home.  Its limit follows its use: it doubles (up
 * to its shape's `outgoing`) when the list filled within
 * OUTGOING_NS_PER_OBJECT (heap.c: 1 us) for each object since it was last
 * sent, and halves (down to `outgoing_start`) when it filled more slowly.
 * A consumer thread that frees what others made keeps its lists long, one
 * remote push for many objects; a program that frees another CPU's
 * objects only now and then - larson's threads, for a moment after each
 * round hands them another thread's table - leaves few of them parked on
 * lists that fill no more, where the owner's heap cannot reuse them.
 * The limit is written only with h's lock, taken (if free) only when it
 * changes: a drain sets it to 0 to stop the sections. */
void pcm_heap_outgoing_sent(struct pcm_heap *h, unsigned cls);
/* Objects a refill moves into h's cache of cls, or a flush takes out of
 * it: half its limit now, at most 64 and at least 1. */
unsigned pcm_heap_batch(const struct pcm_heap *h, unsigned cls);
/* The most objects h's cache of class cls holds now: its limit, or its
 * shape's start while a drain has it stopped. */
uint32_t pcm_heap_room(const struct pcm_heap *h, unsigned cls);

/* The plan of a refill of class cls that is about to cut (h locked): how
 * many objects to cut, and (*others_home) whether the other big classes'
 * cached objects go home first.
 *
 * Cut: the batch (pcm_heap_batch), but one object of a big class
 * (sizeclass.h: one object to a span) while other big classes have
 * objects cached.  With assorted big classes in use the objects beyond the
 * one asked for mostly went back unused, as the next refill of another
 * class sent them home: random mallocs of 16..64 KiB (30 live) cut 3.2
 * spans for 10 mallocs with the batch, 1.8 with one, and ran 6 to 14 %
 * faster; batches of 16 mallocs of 40,000 bytes, then their frees, keep
 * the batch (with one: 11.2 M mallocs/s against 13.9 M).
 *
 * Home first: when the cut would leave more than PCM_BIG_IDLE_BYTES of
 * big objects in h's caches, counting one object for each cache that
 * holds any (one load a class; a class up to 64 KiB may hold up to
 * PCM_BIG_CLASS_CACHE_BYTES of its own, heap.c): their spans go back
 * to the segment, and the span cut goes over their pages (sizeclass.c).
 * Before any of this, a malloc of a big class takes a cached object of a
 * class up to twice as big, if there is one, in place of a new span.  So a
 * program that takes turns with buffers of 100 and 200 KiB reuses one
 * object (a malloc and free pair of them: 115 ns, against 108 when every
 * class kept its object; glibc 111, mimalloc 187, jemalloc 343).
 * 1 MiB, not 256 KiB: one object of each of the 18 big classes up to 64
 * KiB comes to 651 KiB, so a program that kept objects of most of them
 * going sent the others home at nearly every refill, and each malloc that
 * missed its cache cut a span (random sizes of 1..64 KiB, 200 live, one
 * thread, medians of 5: 9.7 M replacements a second, 12.6 M with this
 * budget, 14.5 M with PCM_BIG_CLASS_CACHE_BYTES raised as well; peak RSS
 * 14.9, 14.9 and 15.2 MB; tcmalloc 20.3 M and 22.3 MB, mimalloc 12.1 M
 * and 16.6 MB). */
#define PCM_BIG_IDLE_BYTES (1024u * 1024)
/* A big class up to 64 KiB keeps up to this much of its own objects cached
 * (heap.c): 384 KiB, 22 objects of 17 KiB down to 6 of 64 KiB.  256 KiB
 * ran the mix above at 12.6 M; 512 KiB at 14.7 M, but let a CPU's caches
 * hold 15.4 MiB, not 13.1 (tests/unit/cache_limit.c). */
#define PCM_BIG_CLASS_CACHE_BYTES (384u * 1024)
unsigned pcm_heap_refill_plan(const struct pcm_heap *h, unsigned cls, bool *others_home);

/* The classes whose cached objects a refill of big class cls may hand out
 * in its place are cls + 1 up to the one this returns, exclusive: those at
 * most twice its size (pcm_bin_shapes: counted once, not by a loop over
 * the class sizes for each malloc that looks). */
static inline unsigned pcm_big_stand_ins_end(unsigned cls)
{
    return pcm_bin_shapes[cls].stand_ins_end;
}

/* ---- the span layer (heap.c); `_locked`: with that heap's lock ---- */

/* Return every object on h's remote stack of the classes from
 * PCM_FOREIGN_CACHED_MIN bytes up to its span, and with all_classes those
 * on its stacks of the smaller classes (remote_class) too. */
void pcm_heap_drain_remote_locked(struct pcm_heap *h, bool all_classes);
/* The same for one of h's remote stacks. */
void pcm_heap_drain_remote_list_locked(struct pcm_heap *h, volatile pcm_word_t *list);
/* Up to `most` objects of h's remote stack of class cls (below
 * PCM_OUTGOING_CLASSES) as a chain ready to be a whole cache, *first on
 * top: marked free with their depths, the first the count; the rest of
 * the stack goes back to the spans.  Returns the count (0: the stack was
 * empty).  A stack whose top's depth is at most `most` is taken whole as
 * its pushers marked it (remote.h), without a walk; the count is then
 * that depth. */
unsigned pcm_heap_take_remote_class_locked(struct pcm_heap *h, unsigned cls, unsigned most, void **first);
/* Cut up to `want` objects of class cls from h's spans (making spans, and
 * segments, as needed) into a chain linked by word 0: *first ... *last.
 * Returns how many (0: out of memory).  With `depths`, every object comes
 * marked free with its depth as a cache's objects are (free_mark.h): the
 * last 1, the first the count - ready to be a whole cache.  Without,
 * fresh objects carry no free mark (in the hardened build they do, and
 * the chain comes shuffled either way). */
unsigned pcm_heap_cut_locked(struct pcm_heap *h, unsigned cls, unsigned want, bool depths, void **first, void **last);
/* Mark the first `count` objects of a chain free with their depths: `top`
 * for the first, one less for each after it (a whole cache: top ==
 * count).  The last one's link is not followed, so it may be unwritten. */
void pcm_chain_mark_depths(void *chain, unsigned count, pcm_word_t top);
/* obj, an object of one of h's spans, goes back to its span. */
void pcm_heap_return_locked(struct pcm_heap *h, void *obj);
/* The same for every object of a chain linked by word 0 (up to its end:
 * pcm_chain_more), each already carrying the free mark (free_mark.h) as
 * cached and remotely freed objects do; how many went to h's spans.
 * Objects of other heaps' spans (an rseq cache holds any heap's) go onto
 * their owners' remote queues instead. */
size_t pcm_heap_return_chain_locked(struct pcm_heap *h, void *chain);
/* The same for the first n objects of chain only; the rest of it (NULL:
 * none). */
void *pcm_heap_return_first_locked(struct pcm_heap *h, void *chain, size_t n);
/* Give back every span of h with no object out (after draining h's
 * remote queue) and decommit the free pages of h's segments; the bytes
 * given back to the OS.  Objects in per-CPU caches keep their spans. */
size_t pcm_heap_trim_locked(struct pcm_heap *h);
/* The same short of the spans that still hold objects: only what h has
 * no use for at all - its remote frees home, its empty spans back, the
 * pages in no span decommitted (an idle CPU's, for a growing one:
 * decay.c, pcm_decay_reclaim). */
size_t pcm_heap_reclaim_locked(struct pcm_heap *h);
/* A decay tick's share of the spans that still hold objects: the free
 * pages of those that stayed idle - nothing cut from them, nothing back -
 * since the previous tick (all: of every one, after a quiet period -
 * decay.c) (span_trim.c); the bytes given back. */
size_t pcm_heap_decay_spans_locked(struct pcm_heap *h, bool all);
/* Give back every span of h with no object out, also the one a bin keeps
 * to avoid cutting a new span on every refill (trim and decay ticks). */
void pcm_heap_release_empty_spans_locked(struct pcm_heap *h);
/* h's lock if free, else the first free one of the other ready heaps
 * (waiting when all are busy); the heap it locked.  Makes h ready first:
 * every allocation's slow half comes through here. */
struct pcm_heap *pcm_heap_lock_any(struct pcm_heap *h);

/* Test-only fault (see tests/stress): while non-zero, every refill puts
 * its first object into the cache as well as returning it, so the object
 * is handed out twice - a deliberately broken free list that the stress
 * tests must catch.  Read only on the refill path.  Never set in a
 * release build's normal run: nothing but a test writes it. */
extern int pcm_fault_duplicate_refill __attribute__((visibility("hidden")));

/* Give h's empty segments to the segment pool (segment_pool.h); with
 * idle_only, only those that were empty at the last decay tick too.
 * Caller holds h's lock. */
void pcm_heap_pool_empty_segments_locked(struct pcm_heap *h, bool idle_only);
bool pcm_heap_trylock(struct pcm_heap *h);
/* Wait for h's lock (yielding the CPU to its holder): only where a caller
 * must have this heap - fork, malloc_trim - never on an allocation path. */
void pcm_heap_lock(struct pcm_heap *h);
void pcm_heap_unlock(struct pcm_heap *h);
/* For fork: take (and give back) every ready heap's lock, and hold off
 * pcm_heap_prepare meanwhile (so the set of ready heaps stays put). */
void pcm_heaps_lock_all(void);
void pcm_heaps_unlock_all(void);

#endif
