/*
 * cache_rseq_slow.c - the slow halves of the rseq fast path (heap.h): a
 * section that was aborted is started again; an empty cache is refilled
 * from the spans, a full one flushed back to them.  Every change to a
 * cache is one of percpu_rseq.h's sections, made on the cache's own CPU
 * and pushing only that CPU's heap's objects; whatever cannot be done
 * there (the thread moved, the cache filled meanwhile) goes back to the
 * spans under the lock or to the owner's remote queue instead.  A thread
 * the kernel gives no CPU number never caches at all.  No malloc.
 */
#include "heap.h"

#include <errno.h>
#include <sched.h>

#include "decay.h"
#include "free_mark.h"
#include "percpu_rseq.h"
#include "remote.h"
#include "segment.h"

volatile pcm_word_t pcm_rseq_aborts;

void pcm_rseq_count_abort(void)
{
    pcm_fetch_add_acq_rel(&pcm_rseq_aborts, 1);
}

#ifdef PCM_ARCH_RSEQ

pcm_word_t *pcm_rseq_slot0_of_step[PCM_CLASS_TABLE_MAX / 16];

void pcm_rseq_slots_init(void)
{
    for (unsigned i = 0; i < PCM_CLASS_TABLE_MAX / 16; i++)
        pcm_rseq_slot0_of_step[i] = pcm_rseq_slot0(pcm_class_of_step[i]);
}

enum push_result { PUSHED, OTHER_CPU, FULL };

/* Push obj (of owner's spans) onto owner's CPU's cache of class cls, if the
 * thread runs there and the cache has room. */
static enum push_result push_on(struct pcm_heap *owner, unsigned cls, void *obj)
{
    pcm_word_t mark = pcm_free_mark(obj);
    if (PCM_FREE_MARK_WIDE)
        ((pcm_word_t *)obj)[2] = pcm_free_mark_wide(obj);
retry:
    pcm_arch_rseq_push(pcm_rseq_slot0(cls), pcm_cpu_rseq_offset, pcm_heap_index(owner), obj, mark, other_cpu, full,
                       aborted);
    return PUSHED;
other_cpu:
    return OTHER_CPU;
full:
    return FULL;
aborted:
    pcm_rseq_count_abort();
    goto retry;
}

/* Push obj (of any heap's spans; on 32-bit builds its word 2 already
 * marked by the free's fast path) onto the list at slot0 - a cache, or an
 * outgoing list (heap.h) - of the CPU the thread runs on, if it has room;
 * OTHER_CPU: the thread has no CPU number. */
static enum push_result push_here(pcm_word_t *slot0, void *obj)
{
    pcm_word_t mark = pcm_free_mark(obj);
retry:
    pcm_arch_rseq_push_here(slot0, pcm_cpu_rseq_offset, &pcm_heap_count, obj, mark, no_cpu, full, aborted);
    return PUSHED;
no_cpu:
    return OTHER_CPU;
full:
    return FULL;
aborted:
    pcm_rseq_count_abort();
    goto retry;
}

/* An object from the cache of whatever CPU the thread runs on, or EMPTY. */
static void *pop_any(unsigned cls)
{
    void *obj;
retry:
    pcm_arch_rseq_pop(obj, pcm_rseq_slot0(cls), pcm_cpu_rseq_offset, empty, aborted);
    return obj;
empty:
    return PCM_RSEQ_EMPTY;
aborted:
    pcm_rseq_count_abort();
    goto retry;
}

/* Reverse a chain linked by word 0; the result ends in NULL. */
static void *reversed(void *chain)
{
    void *done = NULL;
    while (pcm_chain_more(chain)) {
        void *next = *(void **)chain;
        *(void **)chain = done;
        done = chain;
        chain = next;
    }
    return done;
}

/* Make chain (owner's objects, the lock of owner held; links and depths
 * written, the last object the bottom, its link pcm_heap_list_end's) the
 * whole of owner's CPU's cache, if that cache is empty - the usual case:
 * a refill found it empty, a flush just emptied it.  False (nothing done)
 * otherwise. */
static bool put_chain_locked(struct pcm_heap *owner, unsigned cls, void *chain)
{
retry:
    pcm_arch_rseq_put_if_empty(pcm_rseq_slot0(cls), pcm_cpu_rseq_offset, pcm_heap_index(owner), chain, refused, aborted);
    return true;
aborted:
    pcm_rseq_count_abort();
    goto retry;
refused: /* another CPU now, or the cache is not empty */
    return false;
}

/* Cache the chain of `count` fresh objects (owner's, the lock of owner
 * held, marked with their depths as on an empty cache, the bottom's link
 * pcm_heap_list_end's), its first object on top: at once where the cache
 * is empty, else one by one; what cannot be cached goes back to the
 * spans. */
static void cache_chain_locked(struct pcm_heap *owner, unsigned cls, void *chain, unsigned count)
{
    if (!pcm_chain_more(chain))
        return;
    if (count <= pcm_bin_shapes[cls].limit && put_chain_locked(owner, cls, chain))
        return;
    chain = reversed(chain);
    while (chain) {
        void *next = *(void **)chain;
        if (push_on(owner, cls, chain) != PUSHED)
            pcm_heap_return_locked(owner, chain);
        chain = next;
    }
}

/* One object, no caching: for a thread without a CPU number, and when the
 * thread's own heap is busy (another heap's objects must not enter this
 * CPU's cache). */
static void *take_one_locked(struct pcm_heap *locked, unsigned cls)
{
    void *first, *last;
    return pcm_heap_cut_locked(locked, cls, 1, false, &first, &last) ? first : NULL;
}

/* All of the list at slot0 (a cache's or an outgoing list's) of h's CPU,
 * if the thread runs there; else NULL. */
static void *take_all_on(struct pcm_heap *h, pcm_word_t *slot0)
{
    for (;;) {
        void *chain = pcm_arch_rseq_take_all(slot0, pcm_cpu_rseq_offset, pcm_heap_index(h));
        if (chain != PCM_RSEQ_ABORTED)
            return chain;
        pcm_rseq_count_abort();
    }
}

/* Before a refill of big class cls cuts a span on h's CPU (lock held;
 * pcm_heap_refill_plan): the other big classes' cached objects go home,
 * their one-object spans back to the segment, so the new span can go over
 * their pages. */
static void return_other_big_locked(struct pcm_heap *h, unsigned cls)
{
    for (unsigned c = PCM_CLASS_BIG_FIRST; c < PCM_CLASS_COUNT; c++)
        if (c != cls && pcm_bin_listed_hint(&h->bins[c]))
            pcm_heap_return_chain_locked(h, take_all_on(h, pcm_rseq_slot0(c)));
}

/* A big object of a class above cls, up to twice its size, cached on the
 * thread's CPU (h's): handed out for cls, where cutting a span beside it
 * would commit more pages (heap.h: pcm_heap_refill_plan).  EMPTY if there
 * is none.  No lock: a pop changes no span.  The rest of that cache stays:
 * sent home, it left the caches of a program of assorted big buffers
 * mostly empty, and most of its mallocs took this path (random sizes of
 * 16..64 KiB, 30 live: 11.1 M mallocs/s, 13.5 M with the rest kept; peak
 * RSS 4.2 and 4.1 MB, mimalloc's 6.8). */
static void *take_bigger(const struct pcm_heap *h, unsigned cls)
{
    for (unsigned c = cls + 1, end = pcm_big_stand_ins_end(cls); c < end; c++) {
        if (!pcm_bin_listed_hint(&h->bins[c]))
            continue;
        void *obj = pop_any(c);
        if (obj != PCM_RSEQ_EMPTY)
            return obj;
    }
    return PCM_RSEQ_EMPTY;
}

static void *refill(struct pcm_heap *h, unsigned cls)
{
    struct pcm_heap *locked = pcm_heap_lock_any(h);
    /* (the class stacks wait for their own refills) */
    pcm_heap_drain_remote_locked(locked, false);
    void *obj;
    unsigned count;
    if (locked != h) {
        obj = take_one_locked(locked, cls);
    } else if ((obj = pop_any(cls)) != PCM_RSEQ_EMPTY) {
        /* (refilled by another thread of this CPU meanwhile) */
    } else if (cls < PCM_OUTGOING_CLASSES &&
               (count = pcm_heap_take_remote_class_locked(h, cls, pcm_heap_room(h, cls) + 1, &obj)) != 0) {
        /* This CPU's objects freed on others come back the short way:
         * into the cache (as many as it has room for, and one to hand
         * out), not through their spans. */
        pcm_heap_refilled_locked(h, cls, false);
        cache_chain_locked(h, cls, *(void **)obj, count - 1);
    } else {
        void *last;
        bool others_home;
        unsigned want = pcm_heap_refill_plan(h, cls, &others_home);
        if (others_home)
            return_other_big_locked(h, cls);
        count = pcm_heap_cut_locked(h, cls, want, true, &obj, &last);
        pcm_heap_refilled_locked(h, cls, true);
        if (count) {
            *(pcm_word_t *)last = pcm_heap_list_end(h, cls);
            void *rest = *(void **)obj;
            if (__builtin_expect(pcm_fault_duplicate_refill, 0) && pcm_chain_more(rest)) {
                *(void **)last = obj; /* obj is also cached: handed out twice */
                *(pcm_word_t *)obj = pcm_heap_list_end(h, cls);
                pcm_chain_mark_depths(rest, count, count);
                count++;
            }
            cache_chain_locked(h, cls, rest, count - 1);
        }
    }
    pcm_heap_unlock(locked);
    return obj;
}

void *pcm_heap_alloc_rseq_slow(unsigned cls, void *seen)
{
    void *obj;
    if (seen == PCM_RSEQ_ABORTED) {
        pcm_rseq_count_abort();
        obj = pop_any(cls);
    } else {
        obj = PCM_RSEQ_EMPTY;
    }
    int cpu;
    if (obj == PCM_RSEQ_EMPTY && cls >= PCM_CLASS_BIG_FIRST && (cpu = pcm_rseq_cpu()) >= 0 &&
        pcm_heap_is_ready((unsigned)cpu))
        obj = take_bigger(&pcm_heaps[cpu], cls); /* (a big class: before the lock, the decay check and a refill) */
    if (obj == PCM_RSEQ_EMPTY) {
        pcm_decay_maybe();
        cpu = pcm_rseq_cpu();
        if (cpu >= 0) {
            obj = refill(&pcm_heaps[cpu], cls);
        } else {
            struct pcm_heap *locked = pcm_heap_lock_any(&pcm_heaps[pcm_cpu_current() % pcm_heap_count]);
            pcm_heap_drain_remote_locked(locked, true);
            obj = take_one_locked(locked, cls);
            pcm_heap_unlock(locked);
        }
        if (!obj) {
            errno = ENOMEM;
            return NULL;
        }
    }
    /* A live object never carries the free mark (free_mark.h). */
    pcm_free_mark_clear(obj);
    return obj;
}

/* Every object of chain (an outgoing list's: marked free, of one class,
 * of any heaps' spans) onto its owner's remote stack: one push for all of
 * an owner's objects. */
static void send_home(void *chain)
{
    while (pcm_chain_more(chain)) {
        const struct pcm_span *span = pcm_span_of(pcm_segment_of(chain), chain);
        unsigned owner = span->owner, cls = span->class_plus1 - 1u, n = 1;
        void *first = chain, *last = chain, *rest = NULL, **rest_tail = &rest;
        for (void *obj = *(void **)chain, *next; pcm_chain_more(obj); obj = next) {
            next = *(void **)obj;
            if (pcm_span_of(pcm_segment_of(obj), obj)->owner == owner) {
                *(void **)last = obj;
                last = obj;
                n++;
            } else {
                *rest_tail = obj;
                rest_tail = (void **)obj;
            }
        }
        *rest_tail = NULL;
        pcm_remote_free_chain(&pcm_heaps[owner], cls, first, last, n);
        chain = rest;
    }
}

/* The outgoing list of class cls on the thread's CPU was full when obj
 * was freed (or its heap was never used: limits 0 until it is ready). */
static void send_outgoing(unsigned cls, unsigned owner, void *obj)
{
    int cpu = pcm_rseq_cpu();
    if (cpu >= 0) {
        struct pcm_heap *h = &pcm_heaps[cpu];
        pcm_heap_prepare(h);
        /* (empty if the thread has left h's CPU since the push) */
        send_home(take_all_on(h, pcm_rseq_outgoing_slot0(cls)));
        pcm_heap_outgoing_sent(h, cls);
    }
    pcm_remote_free(&pcm_heaps[owner], cls, obj);
}

/* The cache of class cls on h's CPU was full when obj, of span, was
 * freed there (or h was never used: its limits are 0 until it is made
 * ready). */
static void flush(struct pcm_heap *h, const struct pcm_span *span, void *obj)
{
    unsigned cls = span->class_plus1 - 1u;
    pcm_decay_maybe();
    pcm_heap_prepare(h);
    if (!pcm_heap_trylock(h)) {
        /* Busy: obj's owner takes it back from its remote queue. */
        pcm_remote_free(&pcm_heaps[span->owner], cls, obj);
        return;
    }
    h->stats.flushes++;
    /* Give a batch from the top and obj back, keep the rest: the top, the
     * objects freed last, are still in this CPU's cache for the walk; the
     * rest's depths, counted from the bottom, stay right, so it goes back
     * as it is, in one section.  (The take is empty if the thread has left
     * h's CPU since the push found the cache full.) */
    void *chain = pcm_heap_return_first_locked(h, take_all_on(h, pcm_rseq_slot0(cls)), pcm_heap_batch(h, cls));
    pcm_heap_flushed_locked(h, cls);
    /* obj home: into its span if h owns it, else onto its owner's queue */
    if (span->owner == pcm_heap_index(h))
        pcm_heap_return_locked(h, obj);
    else
        pcm_remote_free(&pcm_heaps[span->owner], cls, obj);
    pcm_heap_drain_remote_locked(h, false); /* (the class stacks wait for their refills) */
    if (chain && !put_chain_locked(h, cls, chain))
        pcm_heap_return_chain_locked(h, chain);
    pcm_heap_unlock(h);
}

void pcm_heap_free_rseq_slow(void *obj, enum pcm_rseq_free_reason why)
{
    struct pcm_span *span = pcm_span_of(pcm_segment_of(obj), obj);
    unsigned cls = span->class_plus1 - 1u;
    enum push_result result = why == PCM_RSEQ_FREE_FULL ? FULL : OTHER_CPU;
    if (why == PCM_RSEQ_FREE_ABORTED) { /* the fast path's push again */
        pcm_rseq_count_abort();
        result = push_on(&pcm_heaps[span->owner], cls, obj);
    }
    if (result == OTHER_CPU && cls >= PCM_OUTGOING_CLASSES) {
        result = push_here(pcm_rseq_slot0(cls), obj);
    } else if (result == OTHER_CPU) {
        result = push_here(pcm_rseq_outgoing_slot0(cls), obj);
        if (result == FULL) {
            send_outgoing(cls, span->owner, obj);
            return;
        }
    }
    if (result == PUSHED)
        return;
    int cpu = pcm_rseq_cpu();
    if (result == FULL && cpu >= 0)
        flush(&pcm_heaps[cpu], span, obj);
    else
        pcm_remote_free(&pcm_heaps[span->owner], cls, obj);
}

/* On each CPU the thread may use, in turn: that CPU's caches, all
 * classes, back to the spans. */
void pcm_heap_flush_caches_rseq(void)
{
    cpu_set_t saved, one;
    if (sched_getaffinity(0, sizeof saved, &saved))
        return;
    for (unsigned cpu = 0; cpu < pcm_heap_count && cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &saved) || !pcm_heap_is_ready(cpu))
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one))
            continue;
        struct pcm_heap *h = &pcm_heaps[cpu];
        pcm_heap_lock(h);
        /* (a take is empty if the thread was moved off the CPU meanwhile) */
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
            pcm_heap_return_chain_locked(h, take_all_on(h, pcm_rseq_slot0(c)));
        for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++)
            send_home(take_all_on(h, pcm_rseq_outgoing_slot0(c)));
        pcm_heap_unlock(h);
    }
    sched_setaffinity(0, sizeof saved, &saved);
}

/* ---- draining another CPU's lists (decay of an idle CPU) ---- */

static bool anything_listed(struct pcm_heap *h)
{
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
        if (pcm_bin_listed_hint(&h->bins[c]))
            return true;
    for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++)
        if (pcm_bin_listed_hint(&h->outgoing[c]))
            return true;
    return false;
}

/* A list's whole chain, taken by its owner for good (see below), or NULL;
 * the list left empty. */
static void *take_stopped(volatile pcm_pair_t *list)
{
    void *chain = (void *)pcm_load_relaxed(&list->half.ptr);
    pcm_store_relaxed(&list->half.ptr, pcm_list_end(list));
    return pcm_chain_more(chain) ? chain : NULL;
}

/*
 * Empty the lists of h's CPU from any CPU.  Invariant while it runs: no
 * section on that CPU writes a slot.  Every section that writes a slot
 * without h's lock (pop, push, take all) first reads its bin's limit and
 * leaves at 0 ("empty", "full"); the sections that do not read it (put if
 * empty, and take all in a flush or a trim) run with h's lock, which the
 * caller holds.  So: limits to 0; a fence (membarrier) restarts any
 * section running there, which then reads 0, and orders every slot
 * written before it before our loads; the slots are then ours.  A second
 * fence after they are emptied makes a section that later reads a limit
 * back also read its empty slot: a section that started after the first
 * fence may have read its slot before we emptied it (a push reads the
 * slot before the limit in program order; arm64 may reorder a pop's two
 * loads too) and would commit a link into objects already in their spans
 * if it then read the reopened limit - the second fence restarts it.
 * Should that fence fail, the limits stay 0 (every push and pop of that
 * CPU takes its slow half, which works with them) rather than reopen the
 * lists unfenced; the next drain of h opens them.
 */
bool pcm_heap_drain_caches_rseq_locked(struct pcm_heap *h)
{
    unsigned cpu = pcm_heap_index(h);
    /* (a ready heap's limits are 0 only if a drain left them stopped) */
    if (!anything_listed(h) && pcm_bin_limit(&h->bins[0]))
        return false;
    pcm_heap_set_limits(h, false);
    if (!pcm_os_rseq_fence(cpu)) {
        pcm_heap_set_limits(h, true); /* nothing taken: nothing a section could see half done */
        return false;
    }
    /* The lists are ours now: each goes home as it comes off. */
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
        pcm_heap_return_chain_locked(h, take_stopped(&h->bins[c].cache));
    for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++)
        send_home(take_stopped(&h->outgoing[c].cache));
    if (pcm_os_rseq_fence(cpu))
        pcm_heap_set_limits(h, true);
    return true;
}

#else

void pcm_heap_flush_caches_rseq(void)
{
}

bool pcm_heap_drain_caches_rseq_locked(struct pcm_heap *h)
{
    (void)h;
    return false;
}

#endif
