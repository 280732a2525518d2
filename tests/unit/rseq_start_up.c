/*
 * tests/unit/rseq_start_up.c - the mallocs that came before the fast path
 * was chosen.  A binary of its own, so that its mallocs are the process's
 * first: whichever thread calls malloc first runs start-up, and threads
 * that call it meanwhile wait for start-up to finish.  Both had read the
 * path as "not chosen yet" and went on the CAS path's way: a CAS pop from
 * their CPU's cache, and on a miss the CAS slow half, whose refill pushed
 * its chain by CAS onto the cache of whichever heap it locked - caches
 * that the rseq sections of the threads that came later were using by
 * then.  A section's commit is a plain store that a CAS from another CPU
 * does not see, and the sections keep no tag in the slot (percpu_rseq.h):
 * a CAS pop between an rseq pop's load and its commit handed one object
 * out twice (tests/stress/start_up_race.c shows the effects: objects
 * changed in use, crashes, lists that loop).
 *
 * Checked here without luck: the rseq sections never write a slot's tag
 * half, and every CAS operation of percpu_cache.h bumps it, so after the
 * first mallocs on the rseq path every cache slot and outgoing list of
 * every ready heap must still have tag 0.  Without the rseq path (qemu-user,
 * PCMALLOC_RSEQ=0, the generic and hardened builds) there is nothing to
 * check, and the test says so.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "fast_path.h"
#include "heap.h"
#include "init.h"
#include "sizeclass.h"

#include <sched.h>

#define STARTERS 4u
#define OBJECTS 32u

static volatile unsigned arrived;

/* Each thread's first mallocs, all threads at once, then their frees. */
static void starter(void *arg, unsigned index)
{
    (void)arg, (void)index;
    __atomic_fetch_add(&arrived, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < STARTERS)
        sched_yield();
    void *objects[OBJECTS];
    for (unsigned i = 0; i < OBJECTS; i++)
        objects[i] = pcm_malloc(1 + i % 24);
    for (unsigned i = 0; i < OBJECTS; i++) {
        PCM_CHECK(objects[i] != NULL, "thread %u: malloc(%u) failed", index, 1 + i % 24);
        pcm_free(objects[i]);
    }
}

/* Slots (caches and outgoing lists of ready heaps) whose tag a CAS bumped. */
static unsigned slots_written_by_cas(void)
{
    unsigned written = 0;
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        if (!pcm_heap_is_ready(i))
            continue;
        const struct pcm_heap *h = &pcm_heaps[i];
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
            if (h->bins[c].cache.half.tag) {
                pcm_test_printf("  heap %u, cache of class %u: tag %lu\n", i, c,
                                (unsigned long)h->bins[c].cache.half.tag);
                written++;
            }
        }
        for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++) {
            if (h->outgoing[c].cache.half.tag) {
                pcm_test_printf("  heap %u, outgoing list of class %u: tag %lu\n", i, c,
                                (unsigned long)h->outgoing[c].cache.half.tag);
                written++;
            }
        }
    }
    return written;
}

PCM_TEST(rseq_start_up_mallocs_leave_the_caches_to_the_sections)
{
    PCM_REQUIRE(pcm_load_acquire(&pcm_init_state) != PCM_INIT_DONE,
                "start-up ran before this test: its mallocs must be the process's first");
    pcm_test_run_workers(STARTERS, starter, NULL);
    PCM_REQUIRE(pcm_load_acquire(&pcm_init_state) == PCM_INIT_DONE, "no start-up");
    if (!pcm_fast_path_is_rseq()) {
        pcm_test_printf("  not the rseq path (%s): nothing to check\n", pcm_fast_path_reason());
        return;
    }
    unsigned written = slots_written_by_cas();
    PCM_CHECK(written == 0, "%u rseq cache slot(s) or outgoing list(s) written by a CAS (%u threads starting)",
              written, STARTERS);
    if (!written)
        pcm_test_printf("  %u threads' first mallocs: no rseq slot written by a CAS\n", STARTERS);
}
