/*
 * purge_thread.c - decay's ticks on a thread of their own, if asked for
 * (purge_thread.h).
 */
#include "purge_thread.h"

#include "atomic.h"
#include "decay.h"
#include "init.h"
#include "os.h"

/* NOT_YET until the constructor allows it; then IDLE, STARTING while one
 * caller makes the thread, RUNNING, or FAILED (not tried again: a process
 * out of threads would pay a failed pthread_create on every slow path). */
enum { NOT_YET, IDLE, STARTING, RUNNING, FAILED };
static volatile pcm_word_t state = NOT_YET;

/* Half a purge delay (a tick runs once a delay has passed since the last),
 * at least 10 ms, so that PCMALLOC_PURGE_DELAY=0 does not spin it. */
static unsigned long period_ms(void)
{
    unsigned long half = pcm_opts.purge_delay_ms / 2;
    return half < 10 ? 10 : half;
}

static void purge_loop(void)
{
    for (;;) {
        pcm_os_sleep_ms(period_ms());
        pcm_decay_background();
    }
}

void pcm_purge_thread_allow(void)
{
    pcm_word_t expected = NOT_YET;
    pcm_cas_acq_rel(&state, &expected, IDLE);
}

void pcm_purge_thread_maybe_start(void)
{
    if (!pcm_opts.purge_thread || pcm_load_relaxed(&state) != IDLE)
        return;
    pcm_word_t expected = IDLE;
    if (!pcm_cas_acq_rel(&state, &expected, STARTING))
        return; /* another thread is making it */
    pcm_store_release(&state, pcm_os_start_thread(purge_loop, "pcmalloc-purge") ? RUNNING : FAILED);
}

void pcm_purge_thread_forked(void)
{
    /* (the child has one thread: no race on the state) */
    if (pcm_load_relaxed(&state) != NOT_YET)
        pcm_store_relaxed(&state, IDLE);
}

bool pcm_purge_thread_running(void)
{
    return pcm_load_acquire(&state) == RUNNING;
}
