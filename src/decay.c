/*
 * decay.c - the decay tick (decay.h).  Only heap locks that are free are
 * taken (tried, never waited for), so a tick never blocks a free.  No
 * malloc; the clock is the vDSO's.
 */
#include "decay.h"

#include <errno.h>

#include "fast_path.h"
#include "heap.h"
#include "init.h"
#include "large_cache.h"
#include "os.h"
#include "purge_thread.h"
#include "segment.h"

/* Milliseconds of CLOCK_MONOTONIC at the last tick, at the last tick of
 * the large cache, and at the last call (any slow path's); compared by
 * unsigned difference (elapsed), so a 32-bit wrap (49 days) is harmless. */
static volatile pcm_word_t last_tick_ms;
static volatile pcm_word_t last_large_tick_ms;
static volatile pcm_word_t last_call_ms;

volatile pcm_word_t pcm_decay_ticks;
volatile pcm_word_t pcm_decay_quiet_ticks;

static pcm_word_t now_ms(void)
{
    return (pcm_word_t)pcm_os_monotonic_ms();
}

/* Milliseconds from `then` to `now`, 0 if `then` is the later: a time
 * another thread read after this one read `now`, and stored first.  As a
 * plain unsigned difference that came out near 2^64 (2^32 on 32-bit
 * builds) - a quiet period longer than any delay, in a process whose
 * threads were all in slow paths - and a tick gave back every free page
 * at once (tests/unit/decay.c). */
static pcm_word_t elapsed(pcm_word_t now, pcm_word_t then)
{
    pcm_word_t since = now - then;
    return since <= (pcm_word_t)-1 / 2 ? since : 0;
}

bool pcm_decay_drain_caches_locked(struct pcm_heap *h)
{
    return pcm_fast_path_is_rseq() ? pcm_heap_drain_caches_rseq_locked(h) : pcm_heap_drain_caches_cas_locked(h);
}

/* Whether a tick of `delay` ms, the last one at *last, is due now, and if
 * so whether the period before it was quiet; true for the one caller whose
 * CAS takes the tick (acq_rel: orders the ticks), the others go on. */
static bool tick_due(volatile pcm_word_t *last_at, pcm_word_t delay, pcm_word_t now, pcm_word_t called,
                     bool *quiet)
{
    *quiet = delay && elapsed(now, called) >= delay;
    pcm_word_t last = pcm_load_relaxed(last_at);
    if (elapsed(now, last) < delay && !*quiet)
        return false;
    return pcm_cas_acq_rel(last_at, &last, now);
}

/* The large cache's own tick: a freed mapping no one took again within
 * its delay, as a loop reusing a buffer would, is given back then; no
 * later than the pages' (purge_delay). */
static bool large_cache_tick(pcm_word_t now, pcm_word_t called)
{
    pcm_word_t delay = pcm_opts.large_cache_delay_ms;
    if (delay > pcm_opts.purge_delay_ms)
        delay = pcm_opts.purge_delay_ms;
    bool quiet;
    if (!pcm_large_cache_bytes() || !tick_due(&last_large_tick_ms, delay, now, called, &quiet))
        return false;
    int saved_errno = errno; /* munmap: malloc and free keep it */
    pcm_large_cache_decay(quiet);
    errno = saved_errno;
    return true;
}

/* The ticks due at `now`, the last slow path of the program's having
 * begun at `called`; whether one ran. */
static bool run_ticks(pcm_word_t now, pcm_word_t called)
{
    pcm_word_t delay = pcm_opts.purge_delay_ms;
    bool large = large_cache_tick(now, called);
    /* Quiet: no slow path ran for a whole period before this one.  Every
     * change to the spans, the segments' pages and the large cache is made
     * by a slow path that calls this first, so all that is free now has
     * been free for a period at least: it all goes back at this tick, not
     * over the next two (a program that went idle after a phase gets its
     * memory back at its first refill or flush after the delay). */
    bool quiet;
    if (!tick_due(&last_tick_ms, delay, now, called, &quiet))
        return large;
    /* (two ticks can overlap: one whose CAS wrote the time it found) */
    pcm_fetch_add_acq_rel(&pcm_decay_ticks, 1);
    if (quiet)
        pcm_fetch_add_acq_rel(&pcm_decay_quiet_ticks, 1);
    int saved_errno = errno; /* madvise, munmap: malloc and free keep it */
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        struct pcm_heap *h = &pcm_heaps[i];
        if (!pcm_heap_is_ready(i))
            continue; /* never used: locking it would commit its page */
        if (!pcm_heap_trylock(h))
            continue; /* busy: its segments wait for the next tick */
        /* A CPU idle for a whole period - no refill, no flush - keeps
         * its caches no longer: they go back to their spans now, which
         * can then be given back below.  After a quiet period every
         * CPU's do: the objects a phase freed last would otherwise pin
         * the pages of a span or so each (the tree's destroy left 3.3 MB
         * committed for 176 KiB of cached objects).  A CPU whose threads
         * were hitting their caches all along refills them once a
         * period at most: the refill is a call, so the next period is
         * not quiet. */
        pcm_word_t activity = h->stats.refills + h->stats.flushes;
        if ((quiet || activity == h->activity_at_tick) && pcm_decay_drain_caches_locked(h))
            h->stats.drains++;
        h->activity_at_tick = activity;
        /* Objects freed from other CPUs keep their spans until drained. */
        pcm_heap_drain_remote_locked(h, true);
        /* A bin's last empty span too: once a period costs nothing. */
        pcm_heap_release_empty_spans_locked(h);
        /* Spans still in use, idle since the last tick: their free pages. */
        pcm_heap_decay_spans_locked(h, quiet);
        for (struct pcm_segment *s = h->segments; s; s = s->next)
            pcm_segment_decay(s, quiet);
        /* Empty for a whole period: to the pool, for any heap or a large
         * object (after a quiet one, empty now is enough). */
        pcm_heap_pool_empty_segments_locked(h, !quiet);
        for (struct pcm_segment *s = h->segments; s; s = s->next)
            s->was_empty = pcm_segment_is_empty(s);
        pcm_heap_unlock(h);
    }
    errno = saved_errno;
    return true;
}

void pcm_decay_maybe(void)
{
    pcm_purge_thread_maybe_start();
    pcm_word_t now = now_ms();
    /* Stored only when it changed: at most once a millisecond, so the
     * line is not bounced between CPUs on every refill and flush. */
    pcm_word_t called = pcm_load_relaxed(&last_call_ms);
    if (called != now)
        pcm_store_relaxed(&last_call_ms, now);
    if (!run_ticks(now, called))
        return;
    /* The call lasts as long as its ticks: one that outlasted the delay
     * (one that emptied every cache and walked every span, after a quiet
     * period) must not make the program's next call look like the end of
     * another quiet period, or each tick would set up the next (make bench's
     * tree, one round, freed its nodes in 23 s instead of 0.07 at
     * PCMALLOC_PURGE_DELAY=10; tests/unit/decay.c). */
    pcm_word_t end = now_ms();
    if (end != now)
        pcm_store_relaxed(&last_call_ms, end);
}

void pcm_decay_background(void)
{
    /* Not a call of the program's: the time of its last one stays. */
    run_ticks(now_ms(), pcm_load_relaxed(&last_call_ms));
}

/* ---- the memory of a CPU a thread left (decay.h: pcm_decay_reclaim) ---- */

/* How often a growing heap looks, and how long a heap must have gone
 * without a refill to give its free memory back. */
#define RECLAIM_PERIOD_MS 5u
#define RECLAIM_IDLE_MS 5u

/* 1 while a thread runs a reclaim: one at a time (a run over many heaps
 * can take longer than the period).  Held only with the growing heap's
 * lock, so never across a fork: the fork handlers take every heap lock
 * (preload.c).  The run's own, written only while it is held: the time
 * of the last run, where it left off (so that idle heaps take turns), and
 * the heaps' reclaim_ fields. */
static volatile pcm_word_t reclaiming;
static volatile pcm_word_t last_reclaim_ms;
static unsigned reclaim_next;

/* The heap after heap i, round the ring. */
static unsigned next_heap(unsigned i)
{
    return i + 1 < pcm_heap_count ? i + 1 : 0;
}

void pcm_decay_reclaim(struct pcm_heap *growing)
{
    pcm_word_t now = now_ms(), free_flag = 0;
    /* A look first: a growing heap asks on every span it cuts. */
    if (elapsed(now, pcm_load_relaxed(&last_reclaim_ms)) < RECLAIM_PERIOD_MS ||
        !pcm_cas_acquire(&reclaiming, &free_flag, 1))
        return;
    if (elapsed(now, pcm_load_relaxed(&last_reclaim_ms)) < RECLAIM_PERIOD_MS) {
        pcm_store_release(&reclaiming, 0); /* another ran meanwhile */
        return;
    }
    pcm_store_relaxed(&last_reclaim_ms, now);
    int saved_errno = errno; /* madvise */
    bool done = false;
    for (unsigned k = 0, i = reclaim_next; k < pcm_heap_count; k++, i = next_heap(i)) {
        struct pcm_heap *h = &pcm_heaps[i];
        if (!pcm_heap_is_ready(i))
            continue; /* never used: nothing to give, and writing it would commit its page */
        /* Every ready heap is looked at, to date its last activity. */
        pcm_word_t activity = pcm_load_relaxed(&h->activity);
        if (activity != h->reclaim_activity) {
            h->reclaim_activity = activity;
            h->reclaim_seen_ms = now;
            continue;
        }
        if (done || h == growing || elapsed(now, h->reclaim_seen_ms) < RECLAIM_IDLE_MS || !pcm_heap_trylock(h))
            continue;
        pcm_heap_reclaim_locked(h);
        h->stats.reclaims++;
        pcm_heap_unlock(h);
        reclaim_next = next_heap(i);
        done = true;
    }
    errno = saved_errno;
    pcm_store_release(&reclaiming, 0);
}
