/*
 * init.h - start-up: the first call into pcmalloc, from any thread, at
 * any time (before constructors, inside ld.so) sets everything up once.
 */
#ifndef PCM_INIT_H
#define PCM_INIT_H

#include "atomic.h"
#include "options.h"

extern volatile pcm_word_t pcm_init_state __attribute__((visibility("hidden")));
extern struct pcm_options pcm_opts __attribute__((visibility("hidden")));

#define PCM_INIT_DONE 2u

/* Set up, or wait for the thread that is setting up. Aborts with a message
 * if this CPU cannot run the build or no memory is left for the heaps. */
void pcm_init_slow(void) __attribute__((noinline, cold));

/* The fast path's only check: one acquire load (a plain mov on x86). */
static inline void pcm_ensure_init(void)
{
    if (__builtin_expect(pcm_load_acquire(&pcm_init_state) != PCM_INIT_DONE, 0))
        pcm_init_slow();
}

#endif
