/*
 * decay.c - the decay tick (decay.h).  Only heap locks that are free are
 * taken (tried, never waited for), so a tick never blocks a free.  No
 * malloc; the clock is the vDSO's.
 */
#include "decay.h"

#include <errno.h>
#include <time.h>

#include "fast_path.h"
#include "heap.h"
#include "init.h"
#include "large_cache.h"
#include "segment.h"

/* Milliseconds of CLOCK_MONOTONIC at the last tick, and at the last call
 * (any slow path's); compared by unsigned difference, so a 32-bit wrap
 * (49 days) is harmless. */
static volatile pcm_word_t last_tick_ms;
static volatile pcm_word_t last_call_ms;

static pcm_word_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (pcm_word_t)ts.tv_sec * 1000u + (pcm_word_t)(ts.tv_nsec / 1000000);
}

bool pcm_decay_drain_caches_locked(struct pcm_heap *h)
{
    return pcm_fast_path_is_rseq() ? pcm_heap_drain_caches_rseq_locked(h) : pcm_heap_drain_caches_cas_locked(h);
}

void pcm_decay_maybe(void)
{
    pcm_word_t now = now_ms();
    pcm_word_t delay = pcm_opts.purge_delay_ms;
    /* Stored only when it changed: at most once a millisecond, so the
     * line is not bounced between CPUs on every refill and flush. */
    pcm_word_t called = pcm_load_relaxed(&last_call_ms);
    if (called != now)
        pcm_store_relaxed(&last_call_ms, now);
    /* Quiet: no slow path ran for a whole period before this one.  Every
     * change to the spans, the segments' pages and the large cache is made
     * by a slow path that calls this first, so all that is free now has
     * been free for a period at least: it all goes back at this tick, not
     * over the next two (a program that went idle after a phase gets its
     * memory back at its first refill or flush after the delay). */
    bool quiet = delay && now - called >= delay;
    pcm_word_t last = pcm_load_relaxed(&last_tick_ms);
    if (now - last < delay && !quiet)
        return;
    /* One thread ticks; the others go on (acq_rel: orders the ticks). */
    if (!pcm_cas_acq_rel(&last_tick_ms, &last, now))
        return;
    int saved_errno = errno; /* madvise, munmap: malloc and free keep it */
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        struct pcm_heap *h = &pcm_heaps[i];
        if (!pcm_heap_is_ready(i))
            continue; /* never used: locking it would commit its page */
        if (!pcm_heap_trylock(h))
            continue; /* busy: its segments wait for the next tick */
        /* A CPU idle for a whole period - no refill, no flush - keeps
         * its caches no longer: they go back to their spans now, which
         * can then be given back below.  (Not all caches after a quiet
         * period: the fast path may be using them all along.) */
        pcm_word_t activity = h->stats.refills + h->stats.flushes;
        if (activity == h->activity_at_tick && pcm_decay_drain_caches_locked(h))
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
        pcm_heap_unlock(h);
    }
    pcm_large_cache_decay(quiet);
    errno = saved_errno;
}
