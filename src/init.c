/*
 * init.c - one-time set-up (init.h).  Must never call malloc: a thread
 * that re-entered malloc from here would wait for itself.
 */
#include "init.h"

#include <sched.h>
#include <sys/auxv.h>

#include "cpu.h"
#include "fast_path.h"
#include "free_mark.h"
#include "hardening.h"
#include "heap.h"
#include "message.h"
#include "os.h"
#include "percpu_rseq.h"
#include "segment_map.h"
#include "stats.h"
#include "verbose.h"

volatile pcm_word_t pcm_init_state;
struct pcm_options pcm_opts;
pcm_word_t pcm_free_secret;

enum { INIT_NONE, INIT_RUNNING };

static pcm_word_t random_secret(void)
{
    /* AT_RANDOM: 16 bytes the kernel put on the initial stack. Mixed with
     * an address, so even without it the secret differs per process. */
    pcm_word_t secret = (pcm_word_t)&secret * 0x9E3779B97F4A7C15ULL;
    const unsigned char *random = (const unsigned char *)getauxval(AT_RANDOM);
    if (random)
        for (unsigned i = 0; i < sizeof secret; i++)
            secret ^= (pcm_word_t)random[i] << (8 * i);
    return secret;
}

static const char *without_prefix(const char *message)
{
    static const char prefix[] = "pcmalloc: ";
    for (unsigned i = 0; i < sizeof prefix - 1; i++)
        if (message[i] != prefix[i])
            return message;
    return message + sizeof prefix - 1;
}

void pcm_init_slow(void)
{
    pcm_word_t expected = INIT_NONE;
    if (!pcm_cas_acq_rel(&pcm_init_state, &expected, INIT_RUNNING)) {
        for (unsigned spins = 0; pcm_load_acquire(&pcm_init_state) != PCM_INIT_DONE; spins++) {
            if (spins < 64)
                pcm_cpu_relax();
            else
                sched_yield();
        }
        return;
    }
    const char *error = pcm_arch_init();
    if (error)
        pcm_fatal("%s", without_prefix(error));
    pcm_options_load(&pcm_opts);
    pcm_cpu_init();
    if (pcm_opts.stats)
        pcm_stats_keep_stderr();
    pcm_free_secret = pcm_free_secret_from(random_secret());
    unsigned heaps = pcm_opts.cpus ? pcm_opts.cpus : pcm_os_cpu_count();
    if (heaps > PCM_HEAPS_MAX)
        heaps = PCM_HEAPS_MAX;
    if (!pcm_heaps_init(heaps))
        pcm_fatal("cannot map %u per-CPU heaps: out of memory", heaps);
    pcm_rseq_slots_init();
    pcm_segment_index_init();
    pcm_hardening_startup();
    pcm_fast_path_choose();
    if (pcm_opts.verbose)
        pcm_verbose_startup();
    /* release: everything above is visible to whoever sees DONE */
    pcm_store_release(&pcm_init_state, PCM_INIT_DONE);
}
