/*
 * tests/unit/decay.c - the decay tick empties the caches of a CPU whose
 * heap stayed idle (no refill, no flush) for a whole purge delay, from
 * whatever CPU ticks: a thread fills its CPU's cache and exits, and a
 * few periods later - the ticks run on large allocations here - that
 * cache is empty, its objects back in their spans, and the heap counts
 * a drain.  On the rseq path that is another CPU's cache, which only a
 * membarrier fence lets us take (cache_rseq_slow.c); on the CAS path any
 * thread may.  With one allowed CPU both threads share it, which tests
 * the same thing.  After a quiet period (no call at all for a whole
 * delay) the first tick empties every CPU's caches, also of a CPU that
 * refilled since the tick before.
 *
 * Threads that refill and flush all the time never see a quiet period:
 * with an hour's purge delay, no tick runs while they do.  (Each thread
 * reads the clock, then the time of the last call, which another may
 * have stored from a later reading; taken as an unsigned difference that
 * was a quiet period of 2^64 ms, and the tick gave back all free memory.)
 *
 * Options are set in pcm_opts directly, as PCMALLOC_PURGE_DELAY would
 * set them.
 */
#include "harness.h"

#include "churn.h"

#include "pcmalloc.h"

#include "decay.h"
#include "fast_path.h"
#include "heap.h"
#include "init.h"
#include "sizeclass.h"

#include <pthread.h>
#include <sched.h>

#define OBJECTS 100u
#define OBJECT_SIZE 48u
#define DELAY_MS 30u

static int worker_cpu;
static unsigned worker_objects;
static bool worker_pinned;

/* On worker_cpu, malloc worker_objects objects of the class and free them
 * all.  OBJECTS fill the cache with none flushed (it starts with room for
 * them and a refill's leftovers); BUSY_OBJECTS are more than any cache of
 * the class holds: the CPU refills and flushes, and some stay cached. */
#define BUSY_OBJECTS 4096u
static void *fill_cache(void *unused)
{
    (void)unused;
    static void *objects[BUSY_OBJECTS];
    worker_pinned = pcm_test_pin(worker_cpu);
    for (unsigned i = 0; i < worker_objects; i++)
        objects[i] = pcm_malloc(OBJECT_SIZE);
    for (unsigned i = 0; i < worker_objects; i++)
        pcm_free(objects[i]);
    return NULL;
}

/* fill_cache on a thread of its own; false if it did not run pinned. */
static bool fill_on(int cpu, unsigned objects)
{
    worker_cpu = cpu;
    worker_objects = objects;
    worker_pinned = false;
    pthread_t thread;
    if (pthread_create(&thread, NULL, fill_cache, NULL) != 0)
        return false;
    pthread_join(thread, NULL);
    return worker_pinned;
}

static bool cache_holds(struct pcm_heap *h, unsigned cls)
{
    return pcm_bin_listed_hint(&h->bins[cls]);
}

/* Each test runs pinned to the first allowed CPU, its worker on the last
 * (the same one where only one is allowed), at a purge delay of DELAY_MS. */
struct setting {
    int first, last;
    cpu_set_t affinity;
    unsigned purge_delay_ms;
};

static bool set_up(struct setting *s)
{
    pcm_free(pcm_malloc(1)); /* initialised: the path chosen, pcm_opts final */
    pcm_test_allowed_cpus(&s->first, &s->last);
    sched_getaffinity(0, sizeof s->affinity, &s->affinity);
    if (s->first < 0 || !pcm_test_pin(s->first))
        return false;
    s->purge_delay_ms = pcm_opts.purge_delay_ms;
    pcm_opts.purge_delay_ms = DELAY_MS;
    return true;
}

static void tear_down(const struct setting *s)
{
    pcm_opts.purge_delay_ms = s->purge_delay_ms;
    sched_setaffinity(0, sizeof s->affinity, &s->affinity);
}

PCM_TEST(decay_drains_the_caches_of_an_idle_cpu)
{
    struct setting setting;
    PCM_REQUIRE(set_up(&setting), "cannot pin to an allowed CPU");
    int first = setting.first, last = setting.last;
    unsigned cls = pcm_size_class(OBJECT_SIZE);
    PCM_REQUIRE(pcm_bin_shapes[cls].start >= OBJECTS + 64, "the %u-byte cache starts at %u", OBJECT_SIZE,
                pcm_bin_shapes[cls].start);
    PCM_REQUIRE(fill_on(last, OBJECTS), "cannot run a worker pinned to CPU %d", last);
    struct pcm_heap *h = &pcm_heaps[(unsigned)last % pcm_heap_count];
    PCM_REQUIRE(cache_holds(h, cls), "CPU %d's cache of %u bytes is empty after %u frees there", last, OBJECT_SIZE,
                OBJECTS);
    pcm_word_t drains = h->stats.drains, returned = h->stats.returned[cls];

    /* Ticks come with large allocations, three a period, so that no
     * period is quiet (after a quiet one every CPU's caches go: the test
     * below); the heap's first tick notes its activity, the next finds it
     * unchanged.  Nothing here refills or flushes the worker's CPU's
     * caches. */
    unsigned periods = 0;
    for (; periods < 40 && cache_holds(h, cls); periods++) {
        for (unsigned third = 0; third < 3; third++) {
            pcm_test_sleep_ms(DELAY_MS / 3);
            pcm_free(pcm_malloc(PCM_SMALL_MAX + 1));
        }
    }
    pcm_test_printf("  %s path: CPU %d's cache drained after %u periods of %u ms, from CPU %d\n", pcm_fast_path_name(),
                    last, periods, DELAY_MS, first);
    PCM_CHECK(!cache_holds(h, cls), "CPU %d's cache still holds objects after %u idle periods", last, periods);
    PCM_CHECK(h->stats.drains > drains, "no drain counted (%lu)", (unsigned long)h->stats.drains);
    PCM_CHECK(h->stats.returned[cls] - returned >= OBJECTS, "%lu objects back in their spans, %u cached",
              (unsigned long)(h->stats.returned[cls] - returned), OBJECTS);
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        PCM_CHECK(!pcm_fast_path_is_rseq() || pcm_bin_limit(&h->bins[c]) == pcm_bin_shapes[c].start,
                  "class %u: limit %u after the drain, not %u", c, pcm_bin_limit(&h->bins[c]),
                  pcm_bin_shapes[c].start);
        /* (the fill's refill had marked its class) */
        PCM_CHECK(!pcm_fast_path_is_rseq() || h->adapt[c] == 0, "class %u: refill and flush history 0x%x kept "
                  "across the drain", c, h->adapt[c]);
    }

    /* The CPU's caches work as before. */
    PCM_REQUIRE(fill_on(last, OBJECTS), "cannot run a worker pinned to CPU %d", last);
    PCM_CHECK(cache_holds(h, cls), "CPU %d caches nothing after the drain", last);
    tear_down(&setting);
}

/* ---- after a quiet period, every CPU's caches ---- */

/* A program's last phase freed objects into a CPU's caches and the program
 * then made no call for a whole period: the first tick after that empties
 * those caches at once, although their CPU refilled since the tick before
 * (it is not idle by the count of the test above). */
PCM_TEST(decay_after_a_quiet_period_drains_every_cpu)
{
    struct setting setting;
    PCM_REQUIRE(set_up(&setting), "cannot pin to an allowed CPU");
    int last = setting.last;
    unsigned cls = pcm_size_class(OBJECT_SIZE);

    /* A tick notes every heap's activity; then the worker's CPU refills
     * and flushes (after that tick, or after one that its first refill
     * ran). */
    pcm_test_sleep_ms(DELAY_MS);
    pcm_free(pcm_malloc(PCM_SMALL_MAX + 1));
    PCM_REQUIRE(fill_on(last, BUSY_OBJECTS), "cannot run a worker pinned to CPU %d", last);
    struct pcm_heap *h = &pcm_heaps[(unsigned)last % pcm_heap_count];
    PCM_REQUIRE(cache_holds(h, cls), "CPU %d's cache of %u bytes is empty after %u frees there", last, OBJECT_SIZE,
                BUSY_OBJECTS);
    PCM_REQUIRE(h->stats.refills + h->stats.flushes != h->activity_at_tick,
                "CPU %d neither refilled nor flushed since the last tick", last);
    pcm_word_t returned = h->stats.returned[cls];

    /* Quiet: no call for two periods, then one tick. */
    pcm_test_sleep_ms(2 * DELAY_MS);
    pcm_free(pcm_malloc(PCM_SMALL_MAX + 1));
    PCM_CHECK(!cache_holds(h, cls), "CPU %d's cache still holds objects after the first tick of a quiet period",
              last);
    PCM_CHECK(h->stats.returned[cls] > returned, "no object back in its span");
    tear_down(&setting);
}

/* ---- no tick before the delay, whatever the threads' clocks say ---- */

#define HAMMER_MS 300u

static volatile pcm_word_t hammering;

/* Rounds that refill and flush (churn.h), each of which asks whether a
 * tick is due; each thread starts at a class of its own. */
static void hammer(void *arg, unsigned index)
{
    (void)arg;
    size_t size = PCM_CHURN_FIRST + 256 * (index % 9);
    while (pcm_load_relaxed(&hammering))
        size = pcm_test_churn_round(size);
}

static void stop_hammering(void *arg, unsigned index)
{
    (void)arg;
    if (index == 0) {
        pcm_test_sleep_ms(HAMMER_MS);
        pcm_store_relaxed(&hammering, 0);
    } else {
        hammer(arg, index);
    }
}

PCM_TEST(threads_in_slow_paths_see_no_quiet_period)
{
    pcm_free(pcm_malloc(1)); /* the first slow path's tick is behind us */
    unsigned saved_delay = pcm_opts.purge_delay_ms;
    pcm_opts.purge_delay_ms = 3600000;
    pcm_word_t ticks = pcm_load_relaxed(&pcm_decay_ticks);
    unsigned threads = pcm_test_threads();
    pcm_store_relaxed(&hammering, 1);
    int started = pcm_test_run_workers(threads + 1, stop_hammering, NULL);
    pcm_word_t during = pcm_load_relaxed(&pcm_decay_ticks) - ticks;
    pcm_opts.purge_delay_ms = saved_delay;
    PCM_REQUIRE(started == 0, "the threads did not start");
    pcm_test_printf("  %u threads refilling and flushing for %u ms, purge delay an hour: %lu decay ticks\n",
                    threads, HAMMER_MS, (unsigned long)during);
    PCM_CHECK(during == 0, "%lu decay ticks within an hour's delay", (unsigned long)during);
}

/* ---- a tick that outlasts the delay is no quiet period ---- */

/* After a quiet period the first tick empties every cache and walks every
 * partial span's free list, which in a big heap takes longer than a short
 * delay.  The program's next call, right after that tick, must not count
 * as the end of another quiet period: the tick was a call of the
 * program's for as long as it ran.  (Each quiet tick had set up the next,
 * and at PCMALLOC_PURGE_DELAY=10 make bench's tree took 23 s to free what
 * it frees in 0.07.)  The heap: two million objects, seven in eight freed
 * at random with no tick, so that no span is trimmed before the quiet
 * tick. */
#define LONG_TICK_DELAY_MS 10u
#define LONG_TICK_OBJECTS (1u << 21)

PCM_TEST(a_tick_that_outlasts_the_delay_is_no_quiet_period)
{
    struct setting setting;
    PCM_REQUIRE(set_up(&setting), "cannot pin to an allowed CPU");
    pcm_opts.purge_delay_ms = 3600000; /* no tick while the heap is built */
    void **objects = pcm_malloc(LONG_TICK_OBJECTS * sizeof *objects);
    PCM_REQUIRE(objects != NULL, "no room for the table");
    uint64_t rng = pcm_test_seed() | 1;
    for (unsigned i = 0; i < LONG_TICK_OBJECTS; i++)
        objects[i] = pcm_malloc(OBJECT_SIZE);
    /* In an order that scatters each span's free list over its span (an
     * odd stride is a permutation of a power of two), as a program's
     * frees would; walking it then misses the data cache at every step. */
    for (unsigned k = 0; k < LONG_TICK_OBJECTS; k++) {
        unsigned i = (k * 0x9E3779B1u) & (LONG_TICK_OBJECTS - 1);
        if (pcm_test_rand(&rng) % 8) {
            pcm_free(objects[i]);
            objects[i] = NULL;
        }
    }

    pcm_opts.purge_delay_ms = LONG_TICK_DELAY_MS;
    pcm_test_sleep_ms(2 * LONG_TICK_DELAY_MS);
    pcm_word_t quiet = pcm_load_relaxed(&pcm_decay_quiet_ticks);
    uint64_t start = pcm_test_clock_ns();
    void *large = pcm_malloc(PCM_SMALL_MAX + 1);
    uint64_t took_ms = (pcm_test_clock_ns() - start) / 1000000;
    pcm_word_t after_quiet = pcm_load_relaxed(&pcm_decay_quiet_ticks);
    pcm_free(large); /* the next call, at once */
    pcm_word_t after_next = pcm_load_relaxed(&pcm_decay_quiet_ticks);

    for (unsigned i = 0; i < LONG_TICK_OBJECTS; i++)
        pcm_free(objects[i]);
    pcm_free(objects);
    tear_down(&setting);
    pcm_test_printf("  %s path: the quiet tick took %lu ms, delay %u ms; quiet ticks: %lu, then %lu\n",
                    pcm_fast_path_name(), (unsigned long)took_ms, LONG_TICK_DELAY_MS,
                    (unsigned long)(after_quiet - quiet), (unsigned long)(after_next - after_quiet));
    PCM_REQUIRE(after_quiet - quiet == 1, "%lu quiet ticks in the first call after %u ms with none",
                (unsigned long)(after_quiet - quiet), 2 * LONG_TICK_DELAY_MS);
    PCM_REQUIRE(took_ms >= 2 * LONG_TICK_DELAY_MS, "the quiet tick took %lu ms: too quick to tell",
                (unsigned long)took_ms);
    PCM_CHECK(after_next == after_quiet, "the call after a %lu ms tick counted as the end of a quiet period",
              (unsigned long)took_ms);
}
