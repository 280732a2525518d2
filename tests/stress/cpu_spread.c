/*
 * tests/stress/cpu_spread.c - the per-CPU heaps on a machine with several
 * CPUs: one thread pinned to each CPU the process may use.
 *
 *   - each pinned thread must see its own CPU (sched_getcpu and the
 *     allocator's own pcm_cpu_current, which reads glibc's rseq area when
 *     the kernel has one), and its allocations must come from that CPU's
 *     heap: the heap's statistics (objects served from its spans) grow by
 *     about what the thread allocated, so the work really spreads over
 *     several heaps;
 *   - a remote-free stress: in rounds, every thread allocates a batch of
 *     patterned objects and hands it to a thread on another CPU (a
 *     different partner each round, so every pair of CPUs is exercised),
 *     which checks each object completely and frees it - every one of
 *     those frees is remote, and every heap must have drained remote frees
 *     by the end.  A double hand-out or a lost write shows as a pattern
 *     mismatch (pattern.h).
 *
 * It needs two CPUs with different heaps.  With fewer (a 1-CPU machine, a
 * narrow affinity mask, PCMALLOC_CPUS=1) it says so and skips - unless
 * PCM_TEST_EXPECT_CPUS=n is set (the whole-machine QEMU runs set it to
 * their virtual CPU count), which turns fewer than n usable CPUs into a
 * failure: a VM that came up with one CPU must not pass by skipping.
 * Under qemu-user, which passes affinity and getcpu to the host, it runs
 * on the host's CPUs.  PCM_TEST_SCALE scales the rounds.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "cpu.h"
#include "heap.h"
#include "sizeclass.h"

#include "pattern.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#define MAX_CPUS 64u
/* Objects each pinned thread allocates in the spread test: well above a
 * cache's capacity (CACHE_MAX, 1024 objects), so most must be cut from the
 * heap's spans and show in its `served` count. */
#define SPREAD_OBJECTS 4096u
#define SPREAD_SIZE 48u
#define REMOTE_ROUNDS 500ul
#define REMOTE_BATCH 256u

struct cpus {
    unsigned count;
    int cpu[MAX_CPUS];
    unsigned heap[MAX_CPUS]; /* the heap pcm_heap_current picks on cpu[i] */
};

static unsigned long parse_env(const char *name)
{
    const char *s = pcm_test_getenv(name);
    unsigned long v = 0;
    for (; s && *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (unsigned long)(*s - '0');
    return v;
}

/* The CPUs of this process's affinity mask whose heaps differ (heaps are
 * shared round-robin when PCMALLOC_CPUS gives fewer heaps than CPUs),
 * at most MAX_CPUS.  False, with the reason printed, when the test cannot
 * run here; a failure instead when PCM_TEST_EXPECT_CPUS asks for more. */
static bool usable_cpus(struct cpus *out)
{
    pcm_free(pcm_malloc(1)); /* start the allocator: pcm_heap_count */
    memset(out, 0, sizeof *out);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set)) {
        PCM_CHECK(0, "sched_getaffinity failed");
        return false;
    }
    bool heap_taken[MAX_CPUS] = {false};
    unsigned allowed = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        allowed++;
        unsigned heap = (unsigned)cpu % pcm_heap_count;
        if (out->count == MAX_CPUS || heap >= MAX_CPUS || heap_taken[heap])
            continue;
        heap_taken[heap] = true;
        out->cpu[out->count] = cpu;
        out->heap[out->count] = heap;
        out->count++;
    }
    unsigned long expected = parse_env("PCM_TEST_EXPECT_CPUS");
    pcm_test_printf("  %u CPUs online, %u in the affinity mask, %u heaps, CPU read from %s\n",
                    pcm_test_cpu_count(), allowed, pcm_heap_count, pcm_cpu_source());
    if (expected) {
        PCM_CHECK(out->count >= expected, "%u usable CPUs with their own heaps, PCM_TEST_EXPECT_CPUS=%lu",
                  out->count, expected);
        return out->count >= expected && out->count >= 2;
    }
    if (out->count < 2) {
        pcm_test_printf("  skipped: needs 2 CPUs with heaps of their own, has %u\n", out->count);
        return false;
    }
    return true;
}

static bool pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* Pin the caller to cpus->cpu[index] and check that the kernel, glibc and
 * the allocator all agree it runs there. */
static bool pin_and_check(const struct cpus *cpus, unsigned index)
{
    int cpu = cpus->cpu[index];
    if (!pin_to(cpu)) {
        PCM_CHECK(0, "thread %u: cannot pin to CPU %d", index, cpu);
        return false;
    }
    int seen = sched_getcpu();
    unsigned mine = pcm_cpu_current();
    unsigned heap = pcm_heap_current_index();
    PCM_CHECK(seen == cpu, "thread %u pinned to CPU %d, sched_getcpu says %d", index, cpu, seen);
    PCM_CHECK(mine == (unsigned)cpu, "thread %u pinned to CPU %d, pcm_cpu_current (%s) says %u", index, cpu,
              pcm_cpu_source(), mine);
    PCM_CHECK(heap == cpus->heap[index], "thread %u on CPU %d uses heap %u, not %u", index, cpu, heap,
              cpus->heap[index]);
    return seen == cpu && mine == (unsigned)cpu && heap == cpus->heap[index];
}

/* Sum of a per-class counter of heap h.  Read only while no other thread
 * allocates (before the workers start, after they are joined). */
static unsigned long heap_served(unsigned h)
{
    unsigned long sum = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
        sum += pcm_heaps[h].stats.served[c];
    return sum;
}

/* ---- each CPU allocates from its own heap ---- */

struct spread {
    struct cpus cpus;
    unsigned long allocated[MAX_CPUS];
};

static void spread_worker(void *arg, unsigned index)
{
    struct spread *run = arg;
    if (!pin_and_check(&run->cpus, index))
        return;
    void **objects = pcm_test_shared_alloc(SPREAD_OBJECTS * sizeof(void *));
    PCM_REQUIRE(objects, "thread %u: cannot map its object array", index);
    unsigned n = 0;
    for (; n < SPREAD_OBJECTS; n++) {
        objects[n] = pcm_malloc(SPREAD_SIZE);
        if (!objects[n])
            break;
        pcm_pattern_fill(objects[n], SPREAD_SIZE, n);
    }
    PCM_CHECK(n == SPREAD_OBJECTS, "thread %u: malloc failed after %u objects", index, n);
    for (unsigned i = 0; i < n; i++) {
        PCM_CHECK(pcm_pattern_check(objects[i], SPREAD_SIZE, i) == PCM_PATTERN_OK,
                  "thread %u on CPU %d: object %u (%p) overwritten", index, run->cpus.cpu[index], i, objects[i]);
        pcm_free(objects[i]);
    }
    run->allocated[index] = n;
    pcm_test_shared_free(objects, SPREAD_OBJECTS * sizeof(void *));
}

/* One run of the spread workers: true when every heap served at least
 * half of what its CPU's thread allocated.  At most one cache's worth
 * (1024) can come from what was cached before; the rest must have been cut
 * from this heap's spans - unless its lock was busy, when a refill takes
 * another heap (pcm_heap_lock_any).  In a whole-machine VM on a loaded host
 * a lock holder's virtual CPU can stall for milliseconds, so a miss is
 * printed and the run repeated; only a heap that misses every time fails. */
static bool spread_once(struct spread *run, unsigned attempt, bool last)
{
    unsigned long before[MAX_CPUS];
    memset(run->allocated, 0, sizeof run->allocated);
    for (unsigned i = 0; i < run->cpus.count; i++)
        before[i] = heap_served(run->cpus.heap[i]);
    pcm_test_run_workers(run->cpus.count, spread_worker, run);
    unsigned spread_over = 0;
    bool all = true;
    for (unsigned i = 0; i < run->cpus.count; i++) {
        unsigned long served = heap_served(run->cpus.heap[i]) - before[i];
        pcm_test_printf("  run %u: CPU %d -> heap %u: %lu objects allocated, %lu served from its spans\n", attempt,
                        run->cpus.cpu[i], run->cpus.heap[i], run->allocated[i], served);
        if (served < SPREAD_OBJECTS / 2) {
            all = false;
            if (last)
                PCM_CHECK(0, "heap %u of CPU %d served only %lu of %u objects in run %u, under half in every run", run->cpus.heap[i],
                          run->cpus.cpu[i], served, SPREAD_OBJECTS, attempt);
        }
        spread_over += served > 0;
    }
    PCM_CHECK(spread_over >= 2, "allocations spread over %u heaps only", spread_over);
    return all;
}

#define SPREAD_RUNS 3u

PCM_TEST(cpu_spread_each_cpu_allocates_from_its_own_heap)
{
    static struct spread run;
    memset(&run, 0, sizeof run);
    if (!usable_cpus(&run.cpus))
        return;
    for (unsigned attempt = 1; attempt <= SPREAD_RUNS; attempt++)
        if (spread_once(&run, attempt, attempt == SPREAD_RUNS))
            return;
}

/* ---- remote frees across CPUs ---- */

struct item {
    void *p;
    size_t size;
    uint64_t tag;
};

struct remote_run {
    struct cpus cpus;
    unsigned long rounds;
    uint64_t seed;
    struct item (*batches)[REMOTE_BATCH]; /* batches[i]: what thread i allocated this round */
    unsigned long freed[MAX_CPUS];
    /* A sense-reversing barrier: the last to arrive resets the count and
     * flips the sense the others wait on. */
    unsigned arrived;
    unsigned sense;
};

static void barrier(struct remote_run *run, unsigned *my_sense)
{
    *my_sense ^= 1;
    /* acq_rel: the last arriver sees every thread's batch writes; the
     * others see them through its release store of the sense */
    if (__atomic_add_fetch(&run->arrived, 1, __ATOMIC_ACQ_REL) == run->cpus.count) {
        __atomic_store_n(&run->arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&run->sense, *my_sense, __ATOMIC_RELEASE);
        return;
    }
    unsigned spins = 0;
    while (__atomic_load_n(&run->sense, __ATOMIC_ACQUIRE) != *my_sense)
        if (++spins % 64 == 0)
            pcm_test_yield();
}

/* Mostly tiny, some up to 1 KiB: several size classes per batch. */
static size_t random_size(uint64_t *rng)
{
    return 1 + (size_t)(pcm_test_rand(rng) % (pcm_test_rand(rng) % 4 ? 128 : 1024));
}

static void remote_worker(void *arg, unsigned index)
{
    struct remote_run *run = arg;
    unsigned n = run->cpus.count, sense = 0;
    bool pinned = pin_and_check(&run->cpus, index);
    uint64_t rng = pcm_pattern_mix(run->seed + index) | 1;
    bool reported = false;
    for (unsigned long round = 0; round < run->rounds; round++) {
        struct item *mine = run->batches[index];
        for (unsigned k = 0; k < REMOTE_BATCH; k++) {
            mine[k].size = random_size(&rng);
            mine[k].tag = (uint64_t)round << 32 | (uint64_t)index << 16 | k;
            mine[k].p = pinned ? pcm_malloc(mine[k].size) : NULL;
            if (mine[k].p)
                pcm_pattern_fill(mine[k].p, mine[k].size, mine[k].tag);
        }
        barrier(run, &sense);
        /* The partner turns with the round: 1, 2, ..., n-1 ahead. */
        unsigned from = (index + 1 + (unsigned)(round % (n - 1))) % n;
        struct item *theirs = run->batches[from];
        for (unsigned k = 0; k < REMOTE_BATCH; k++) {
            if (!theirs[k].p)
                continue;
            size_t bad = pcm_pattern_check(theirs[k].p, theirs[k].size, theirs[k].tag);
            if (bad != PCM_PATTERN_OK) {
                if (!reported)
                    PCM_CHECK(0, "round %lu: object %u (%p, %zu bytes) from CPU %d, checked on CPU %d: byte %zu changed",
                              round, k, theirs[k].p, theirs[k].size, run->cpus.cpu[from], run->cpus.cpu[index], bad);
                reported = true;
                continue; /* someone else owns it now: leave it */
            }
            pcm_free(theirs[k].p);
            run->freed[index]++;
        }
        barrier(run, &sense);
    }
}

static unsigned long heap_remote_drained(unsigned h)
{
    return pcm_heaps[h].stats.remote_drained;
}

PCM_TEST(cpu_spread_remote_frees_across_cpus)
{
    static struct remote_run run;
    memset(&run, 0, sizeof run);
    if (!usable_cpus(&run.cpus))
        return;
    run.rounds = pcm_test_scale(REMOTE_ROUNDS);
    run.seed = pcm_test_seed();
    size_t bytes = run.cpus.count * sizeof *run.batches;
    run.batches = pcm_test_shared_alloc(bytes);
    PCM_REQUIRE(run.batches, "cannot map %u batches", run.cpus.count);
    unsigned long before[MAX_CPUS];
    for (unsigned i = 0; i < run.cpus.count; i++)
        before[i] = heap_remote_drained(run.cpus.heap[i]);

    uint64_t start = pcm_test_clock_ns();
    pcm_test_run_workers(run.cpus.count, remote_worker, &run);
    uint64_t ns = pcm_test_clock_ns() - start;

    unsigned long expected = run.rounds * REMOTE_BATCH;
    for (unsigned i = 0; i < run.cpus.count; i++) {
        unsigned long drained = heap_remote_drained(run.cpus.heap[i]) - before[i];
        pcm_test_printf("  CPU %d: freed %lu objects of other CPUs; heap %u drained %lu remote frees\n",
                        run.cpus.cpu[i], run.freed[i], run.cpus.heap[i], drained);
        PCM_CHECK(run.freed[i] == expected, "CPU %d freed %lu of %lu objects (%u threads)", run.cpus.cpu[i],
                  run.freed[i], expected, run.cpus.count);
        /* Its own objects came back to it from other CPUs every round:
         * its allocations (cache refills) must have drained some. */
        PCM_CHECK(drained > 0, "heap %u of CPU %d drained no remote free in %lu rounds", run.cpus.heap[i],
                  run.cpus.cpu[i], run.rounds);
    }
    pcm_test_printf("  %u CPUs, %lu rounds of %u objects each, %lu.%02lu s\n", run.cpus.count, run.rounds,
                    REMOTE_BATCH, (unsigned long)(ns / 1000000000u), (unsigned long)(ns / 10000000u % 100));
    pcm_test_shared_free(run.batches, bytes);
}
