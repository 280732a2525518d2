/*
 * tests/stress/two_heaps.h - two CPUs the calling thread may run on whose
 * heaps differ, for the stress tests that move threads from one heap to
 * another (cpu_move.c, reclaim_race.c).
 *
 * Such tests need two CPUs with heaps of their own; they skip otherwise,
 * unless PCM_TEST_EXPECT_CPUS asks for them (as in cpu_spread.c).  Under
 * qemu-user they run on the host's CPUs.
 */
#ifndef PCM_TEST_STRESS_TWO_HEAPS_H
#define PCM_TEST_STRESS_TWO_HEAPS_H

#include "harness.h"

#include "pcmalloc.h"

#include "heap.h"

#include <sched.h>
#include <stdlib.h>

struct two_heaps {
    int cpu[2];
    unsigned heap[2];
};

/* Found, with the thread's affinity as it was; false if there are none. */
static inline bool two_heaps_find(struct two_heaps *out)
{
    pcm_free(pcm_malloc(1)); /* start-up: the heaps exist from here on */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return false;
    int found = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || !pcm_test_pin(cpu))
            continue;
        unsigned heap = pcm_heap_current_index();
        if (found == 0 || heap != out->heap[0]) {
            out->cpu[found] = cpu;
            out->heap[found] = heap;
            found++;
        }
    }
    sched_setaffinity(0, sizeof allowed, &allowed);
    return found == 2;
}

/* The same, or false after printing that the test is skipped (a failed
 * check instead when PCM_TEST_EXPECT_CPUS is 2 or more). */
static inline bool two_heaps_or_skip(struct two_heaps *out)
{
    const char *expect = pcm_test_getenv("PCM_TEST_EXPECT_CPUS");
    bool have = two_heaps_find(out);
    if (!have && expect && atoi(expect) >= 2)
        PCM_CHECK(0, "no two CPUs with heaps of their own, PCM_TEST_EXPECT_CPUS=%s", expect);
    else if (!have)
        pcm_test_printf("  skipped: needs 2 CPUs with heaps of their own\n");
    return have;
}

#endif
