/*
 * cpu.c - start-up of cpu.h: find glibc's rseq area.  __rseq_offset and
 * __rseq_size are referenced weakly, so the library still loads with a C
 * library that has no such symbols (then sched_getcpu serves).
 */
#include "cpu.h"

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

ptrdiff_t pcm_cpu_rseq_offset;
bool pcm_cpu_rseq_present;

#ifdef PCM_RSEQ_SIMULATION
static __thread struct rseq simulated_area __attribute__((tls_model("initial-exec"), aligned(32)));
#endif

void pcm_cpu_init(void)
{
    /* Up to rseq_cs: the restartable sequences need that field too.
     * The main thread's registration stands for every thread's: glibc
     * registers all or (tunable off, ENOSYS) none; a thread whose own
     * registration failed reads cpu_id < 0 and falls back. */
    if (&__rseq_offset && &__rseq_size && __rseq_size >= offsetof(struct rseq, rseq_cs) + 8) {
        pcm_cpu_rseq_offset = __rseq_offset;
        pcm_cpu_rseq_present = true;
    }
#ifdef PCM_RSEQ_SIMULATION
    /* For counting the rseq path's instructions under valgrind (bench/
     * callgrind.py), which has no rseq: glibc registered no area, so the
     * sections use an area of our own in every thread's static TLS, all
     * zeroes - CPU 0.  Not glibc's (writing a CPU number there would tell
     * pthread_create the main thread registered, and a new thread whose
     * registration then fails is fatal to glibc).  Nothing restarts the
     * sections, so a build with this is correct while one thread at a
     * time allocates: never a release. */
    else if (&__rseq_size && __rseq_size == 0) {
        pcm_cpu_rseq_offset = (char *)&simulated_area - (char *)__builtin_thread_pointer();
        pcm_cpu_rseq_present = true;
    }
#endif
}
