/*
 * fast_path.c - choosing the fast path (fast_path.h): restartable
 * sequences where the architecture build has them, the C library
 * registered an rseq area the kernel fills in, and every CPU number has
 * a heap of its own; the double-width-CAS path everywhere else.
 */
#include "fast_path.h"

#include "cpu.h"
#include "heap.h"
#include "init.h"
#include "percpu_rseq.h"

volatile pcm_word_t pcm_fast_path;
volatile pcm_word_t pcm_fast_path_rseq_offset;
pcm_word_t pcm_fast_path_settled;
static const char *reason = "start-up has not chosen yet";

void pcm_fast_path_choose(void)
{
#ifdef PCM_ARCH_RSEQ
    unsigned possible; /* read from /sys once, and only when it decides */
    if (!pcm_opts.rseq)
        reason = "PCMALLOC_RSEQ=0";
    else if (!pcm_cpu_rseq_present)
        reason = "the C library registered no rseq area (glibc before 2.35, or glibc.pthread.rseq=0)";
    else if (pcm_rseq_cpu() < 0)
        reason = "the kernel keeps no CPU number in the rseq area (no rseq: qemu-user, valgrind, old kernel)";
    else if ((possible = pcm_os_possible_cpus()) == 0)
        reason = "/sys/devices/system/cpu/possible cannot be read, so a CPU number could lie past the heaps";
    else if (pcm_heap_count < possible)
        reason = "PCMALLOC_CPUS gives fewer heaps than CPUs, so CPUs share caches";
    else {
        reason = "restartable sequences on glibc's rseq area";
#ifdef PCM_ARCH_RSEQ_LISTS_END_AT_SLOT
        pcm_heaps_end_lists_at_slots(); /* (no list holds an object yet) */
#endif
        pcm_fast_path_settled = PCM_FAST_PATH_RSEQ;
        /* release: the heaps and options are visible to whoever sees them */
        pcm_store_release(&pcm_fast_path_rseq_offset, (pcm_word_t)pcm_cpu_rseq_offset);
        pcm_store_release(&pcm_fast_path, PCM_FAST_PATH_RSEQ);
        return;
    }
#elif defined(PCM_HARDENED)
    reason = "the hardened build: its free-list links are encoded in C, which the rseq sections (hand-written asm) "
             "do not do";
#else
    reason = "this architecture build has no restartable sequences";
#endif
    pcm_fast_path_settled = PCM_FAST_PATH_CAS;
    pcm_store_release(&pcm_fast_path, PCM_FAST_PATH_CAS);
}

const char *pcm_fast_path_reason(void)
{
    return reason;
}

pcm_word_t pcm_fast_path_restarts(void)
{
    return pcm_load_relaxed(&pcm_rseq_aborts);
}
