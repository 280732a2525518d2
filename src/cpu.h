/*
 * cpu.h - the CPU this thread runs on now, for choosing a per-CPU heap.
 *
 * glibc (2.35 and later) registers a restartable-sequence area for every
 * thread; the kernel rewrites its cpu_id on every return to user space, so
 * reading it is two loads and no call.  Where no area is registered
 * (qemu-user and valgrind lack rseq, GLIBC_TUNABLES=glibc.pthread.rseq=0,
 * an older glibc) cpu_id reads negative, or __rseq_offset is missing, and
 * sched_getcpu() answers instead.  The answer may be stale by the time it
 * is used - the thread can migrate at any instruction - and nothing
 * depends on it being right: any heap is a correct heap.  No locks, no
 * malloc, no thread-local storage of our own.
 */
#ifndef PCM_CPU_H
#define PCM_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/rseq.h>

#include "os.h"

/* Set once at start-up (pcm_cpu_init): where this process's rseq area
 * sits relative to the thread pointer, and whether there is one. */
extern ptrdiff_t pcm_cpu_rseq_offset __attribute__((visibility("hidden")));
extern bool pcm_cpu_rseq_present __attribute__((visibility("hidden")));

void pcm_cpu_init(void);

/* Which way pcm_cpu_current answers in this process (for statistics). */
static inline const char *pcm_cpu_source(void)
{
    return pcm_cpu_rseq_present ? "glibc's rseq area" : "sched_getcpu()";
}

static inline unsigned pcm_cpu_current(void)
{
    if (__builtin_expect(pcm_cpu_rseq_present, 1)) {
        const volatile struct rseq *area =
            (const volatile struct rseq *)((char *)__builtin_thread_pointer() + pcm_cpu_rseq_offset);
        int32_t cpu = (int32_t)area->cpu_id;
        if (__builtin_expect(cpu >= 0, 1))
            return (unsigned)cpu;
    }
    int cpu = pcm_os_current_cpu();
    return cpu < 0 ? 0 : (unsigned)cpu;
}

#endif
