/*
 * tests/stress/cache_drain.c - another CPU's caches emptied while that
 * CPU's threads use them (pcm_decay_drain_caches_locked, what a decay tick
 * does to a CPU that went idle).  On the rseq path only a thread on a CPU
 * may write that CPU's lists, so the drain stops the CPU's sections
 * (limits 0), fences them with membarrier, takes the lists and fences
 * again before it reopens them.  A missing fence, or a section that does
 * not read its limit, leaves an object both on a list and back in its
 * span: handed out twice, which the patterns below catch (or the free's
 * double-free check, or a crash).  On the CAS path the drain takes each
 * cache with a CAS; the same checks run.
 *
 * cache_drain_torture: more threads than CPUs allocate and free small
 * objects (a third of the frees cross-CPU, through a shared exchange:
 * outgoing lists, foreign objects in caches, remote queues), each object
 * with a header and pattern.h's pattern, checked completely before it is
 * freed, while two threads drain every ready heap in a loop without a
 * pause.  On the rseq path drains must have taken objects (unless the
 * kernel has no fence, when none may); every drain must leave the limits
 * open.  Then a last drain must leave every list empty, and a batch
 * allocated afterwards must be whole, distinct and cached again.
 *
 * cache_drain_hot_cpu: one thread pinned to a CPU allocates and frees
 * tiny objects as fast as it can while another, on a second CPU, drains
 * that CPU's heap as fast as it can; then each heap is drained once more
 * and a batch allocated there must be whole and distinct.  Sections truly
 * in flight during the drains are what the fences are for: without the
 * first or the second one this binary failed in a fifth to all of its
 * runs, depending on the machine's load, mostly here (the torture rarely
 * notices); without the pop's limit check in every run.  The second fence
 * matters on x86 too: a push reads its slot before its limit.
 *
 * cache_drain_of_a_pinned_cpu: a thread pinned to one CPU fills its cache
 * of one class; the test drains that CPU's heap from another CPU and finds
 * its lists empty, the objects back in their spans, the limits open, and
 * the cache taking a freed object again.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "decay.h"
#include "fast_path.h"
#include "heap.h"
#include "os.h"
#include "pattern.h"
#include "sizeclass.h"

#include <sched.h>
#include <string.h>

#define SLOTS 256u
#define EXCHANGE_SLOTS 64u
#define OPS_PER_THREAD 200000ul
#define DRAINERS 2u
#define BATCH 2000u
#define HOT_LIVE 64u
#define HOT_MS 500ul
#define FILL_OBJECTS 60u
#define FILL_SIZE 64u

struct header {
    size_t size;
    uint64_t tag;
};

/* ---- objects ---- */

/* Total bytes (header included): mostly 16..256, one in eight up to 4 KiB. */
static size_t random_size(uint64_t *rng)
{
    size_t max = pcm_test_rand(rng) % 8 ? 256 : 4096;
    return 16 + (size_t)(pcm_test_rand(rng) % (max - 15));
}

static void *object_new(size_t size, uint64_t tag)
{
    struct header *h = pcm_malloc(size);
    if (!h)
        return NULL;
    h->size = size;
    h->tag = tag;
    pcm_pattern_fill(h + 1, size - sizeof *h, tag);
    return h;
}

/* Every byte of the object as written; false (and a failed check) if not. */
static bool object_intact(const void *p, const char *who, unsigned index)
{
    const struct header *h = p;
    size_t size = h->size, bad = 0;
    if (size >= sizeof *h && size <= 4096)
        bad = pcm_pattern_check(h + 1, size - sizeof *h, h->tag);
    PCM_CHECK(bad == PCM_PATTERN_OK, "%s %u: object %p (size %zu, tag %llx) corrupt at byte %zu", who, index, p,
              size, (unsigned long long)h->tag, bad);
    return bad == PCM_PATTERN_OK;
}

static bool object_check_free(void *p, unsigned index)
{
    if (!object_intact(p, "thread", index))
        return false;
    pcm_free(p);
    return true;
}

/* ---- heaps ---- */

/* rseq path: the first list of h (classes, then the outgoing lists from
 * PCM_CLASS_COUNT on) whose limit is not open - between its shape's start
 * and most (heap.h: it adapts) - or -1.  With h's lock held no drain of h
 * is under way, so every limit must be open. */
static int limit_not_open(struct pcm_heap *h)
{
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        uint32_t limit = pcm_bin_limit(&h->bins[c]);
        if (limit < pcm_bin_shapes[c].start || limit > pcm_bin_shapes[c].limit)
            return (int)c;
    }
    for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++) {
        uint32_t limit = pcm_bin_limit(&h->outgoing[c]);
        if (limit < pcm_bin_shapes[c].outgoing_start || limit > pcm_bin_shapes[c].outgoing)
            return (int)(PCM_CLASS_COUNT + c);
    }
    return -1;
}

/* The first list of h (numbered as above; outgoing lists on the rseq
 * path only) that holds an object, or -1. */
static int list_not_empty(struct pcm_heap *h)
{
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
        if (pcm_bin_listed_hint(&h->bins[c]))
            return (int)c;
    if (pcm_fast_path_is_rseq())
        for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++)
            if (pcm_bin_listed_hint(&h->outgoing[c]))
                return (int)(PCM_CLASS_COUNT + c);
    return -1;
}

struct drain_count {
    unsigned long calls, took;
    bool limits_failed; /* reported once */
};

/* One drain of heap i, as decay does it, counted; the limits checked
 * while the lock is still held. */
static void drain_heap(unsigned i, struct drain_count *n, const char *who)
{
    struct pcm_heap *h = &pcm_heaps[i];
    pcm_heap_lock(h);
    bool took = pcm_decay_drain_caches_locked(h);
    int closed = pcm_fast_path_is_rseq() ? limit_not_open(h) : -1;
    pcm_heap_unlock(h);
    n->calls++;
    n->took += took;
    if (closed >= 0 && !n->limits_failed) {
        n->limits_failed = true;
        PCM_CHECK(false, "%s: heap %u's list %d not reopened after a drain that took %s", who, i, closed,
                  took ? "objects" : "nothing");
    }
}

/* The fence the rseq path's drain needs: whether this kernel has it. */
static bool fence_works(void)
{
    return pcm_fast_path_is_rseq() && pcm_os_rseq_fence(pcm_heap_current_index());
}



static void check_fast_path(void)
{
    const char *expect = pcm_test_getenv("PCM_TEST_EXPECT_FAST_PATH");
    if (expect)
        PCM_CHECK(strcmp(expect, pcm_fast_path_name()) == 0, "fast path %s, expected %s (%s)", pcm_fast_path_name(),
                  expect, pcm_fast_path_reason());
}

/* ---- many threads, two drainers ---- */

static void **exchange; /* shared: EXCHANGE_SLOTS objects in flight */
static unsigned long ops;
static unsigned workers;
static volatile unsigned workers_left;
static struct drain_count *drained; /* one per drainer */

static void worker(unsigned index)
{
    uint64_t rng = pcm_test_seed() * 2 + 1 + index * 0x9E3779B97F4A7C15ull;
    void *slots[SLOTS] = {0};
    uint64_t serial = 0;
    for (unsigned long op = 0; op < ops; op++) {
        unsigned i = (unsigned)(pcm_test_rand(&rng) % SLOTS);
        if (!slots[i]) {
            slots[i] = object_new(random_size(&rng), ((uint64_t)index << 40) | serial++);
            if (!slots[i]) {
                PCM_CHECK(false, "thread %u: out of memory", index);
                break;
            }
        } else if (pcm_test_rand(&rng) % 3 == 0) {
            /* Trade it for whatever another thread left in the exchange. */
            unsigned e = (unsigned)(pcm_test_rand(&rng) % EXCHANGE_SLOTS);
            void *other = __atomic_exchange_n(&exchange[e], slots[i], __ATOMIC_ACQ_REL);
            slots[i] = NULL;
            if (other && !object_check_free(other, index))
                break;
        } else {
            if (!object_check_free(slots[i], index))
                break;
            slots[i] = NULL;
        }
    }
    for (unsigned i = 0; i < SLOTS; i++)
        if (slots[i])
            object_check_free(slots[i], index);
    __atomic_fetch_sub(&workers_left, 1, __ATOMIC_RELEASE);
}

/* Every ready heap, again and again, until the workers are done; each
 * drainer starts its rounds at another heap. */
static void drainer(unsigned d)
{
    while (__atomic_load_n(&workers_left, __ATOMIC_ACQUIRE))
        for (unsigned k = 0; k < pcm_heap_count; k++) {
            unsigned i = (k + d) % pcm_heap_count;
            if (pcm_heap_is_ready(i))
                drain_heap(i, &drained[d], "drainer");
        }
}

static void torture_thread(void *arg, unsigned index)
{
    (void)arg;
    if (index < workers)
        worker(index);
    else
        drainer(index - workers);
}

struct batch_entry {
    uintptr_t at;
    size_t size;
};

struct batch_result {
    unsigned made, intact, overlaps;
};

/* `count` (at most BATCH) objects of the sizes size_of picks, allocated
 * together and only then checked: each whole after all were written (two
 * sharing bytes would spoil one's pattern) and no two overlapping - an
 * object on a list and in its span at once is handed out twice here.
 * Freed afterwards. */
static struct batch_result batch(unsigned count, size_t (*size_of)(uint64_t *), uint64_t *rng, const char *what)
{
    static void *objects[BATCH];
    static struct batch_entry sorted[BATCH];
    struct batch_result r = {0, 0, 0};
    for (; r.made < count && r.made < BATCH; r.made++) {
        objects[r.made] = object_new(size_of(rng), 0xBA7C400000ull | r.made);
        if (!objects[r.made])
            break;
    }
    PCM_CHECK(r.made == count, "%s: out of memory after %u of %u objects", what, r.made, count);
    for (unsigned i = 0; i < r.made; i++) {
        r.intact += object_intact(objects[i], what, i);
        sorted[i].at = (uintptr_t)objects[i];
        sorted[i].size = ((struct header *)objects[i])->size;
    }
    /* Shell sort by address (no qsort: the C library's may allocate). */
    for (unsigned gap = r.made / 2; gap; gap /= 2)
        for (unsigned i = gap; i < r.made; i++)
            for (unsigned j = i; j >= gap && sorted[j - gap].at > sorted[j].at; j -= gap) {
                struct batch_entry t = sorted[j];
                sorted[j] = sorted[j - gap];
                sorted[j - gap] = t;
            }
    for (unsigned i = 1; i < r.made; i++)
        r.overlaps += sorted[i - 1].at + sorted[i - 1].size > sorted[i].at;
    PCM_CHECK(r.overlaps == 0, "%s: %u of %u objects overlap the next", what, r.overlaps, r.made);
    for (unsigned i = 0; i < r.made; i++)
        pcm_free(objects[i]);
    return r;
}

/* After the last drain: a batch as above, and once freed, cached again. */
static void batch_after_drains(uint64_t *rng)
{
    struct batch_result r = batch(BATCH, random_size, rng, "after the last drain");
    int cached = -1;
    for (unsigned i = 0; i < pcm_heap_count && cached < 0; i++)
        if (pcm_heap_is_ready(i) && list_not_empty(&pcm_heaps[i]) >= 0)
            cached = (int)i;
    PCM_CHECK(cached >= 0, "%u objects freed after the drains, and no cache holds any", r.made);
    pcm_test_printf("  after the last drain: %u objects, %u whole, %u overlapping; cached again on heap %d\n", r.made,
                    r.intact, r.overlaps, cached);
}

PCM_TEST(cache_drain_torture)
{
    pcm_free(pcm_malloc(1)); /* start-up: the fast path is chosen */
    check_fast_path();
    bool rseq = pcm_fast_path_is_rseq(), fence = fence_works();

    exchange = pcm_test_shared_alloc(EXCHANGE_SLOTS * sizeof *exchange);
    drained = pcm_test_shared_alloc(DRAINERS * sizeof *drained);
    PCM_REQUIRE(exchange && drained, "no shared memory");
    ops = pcm_test_scale(OPS_PER_THREAD);
    workers = pcm_test_threads();
    workers_left = workers;
    pcm_word_t restarts_before = pcm_fast_path_restarts();
    /* The drainers last: should a thread fail to start, no drainer waits
     * for a worker that never ran. */
    PCM_CHECK(pcm_test_run_workers(workers + DRAINERS, torture_thread, NULL) == 0, "threads did not start");
    for (unsigned e = 0; e < EXCHANGE_SLOTS; e++)
        if (exchange[e])
            object_check_free(exchange[e], workers);
    pcm_word_t restarts_after = pcm_fast_path_restarts();

    unsigned long calls = 0, took = 0;
    for (unsigned d = 0; d < DRAINERS; d++) {
        calls += drained[d].calls;
        took += drained[d].took;
    }
    pcm_test_printf("  %u threads, %lu operations each; %u drainers: %lu drains took objects, of %lu "
                    "(fast path %s%s)\n",
                    workers, ops, DRAINERS, took, calls, pcm_fast_path_name(),
                    !rseq ? "" : fence ? ", membarrier fence" : ", no membarrier fence");
    pcm_test_printf("  restarted sections: %lu before, %lu after\n", (unsigned long)restarts_before,
                    (unsigned long)restarts_after);
    if (fence)
        PCM_CHECK(took > 0, "%lu drains of busy CPUs' caches, none took anything", calls);
    else if (rseq)
        PCM_CHECK(took == 0, "%lu drains took objects without the fence they need", took);

    /* A last drain leaves every list of every heap empty, limits open. */
    unsigned heaps = 0;
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        if (!pcm_heap_is_ready(i))
            continue;
        struct pcm_heap *h = &pcm_heaps[i];
        pcm_heap_lock(h);
        pcm_decay_drain_caches_locked(h);
        int listed = fence || !rseq ? list_not_empty(h) : -1;
        int closed = rseq ? limit_not_open(h) : -1;
        pcm_heap_unlock(h);
        heaps++;
        PCM_CHECK(listed < 0, "heap %u: list %d still holds objects after the last drain", i, listed);
        PCM_CHECK(closed < 0, "heap %u: list %d not reopened after the last drain", i, closed);
    }
    PCM_CHECK(heaps > 0, "no heap is ready");
    uint64_t rng = pcm_test_seed() | 1;
    batch_after_drains(&rng);
    pcm_test_shared_free(drained, DRAINERS * sizeof *drained);
    pcm_test_shared_free(exchange, EXCHANGE_SLOTS * sizeof *exchange);
}

/* ---- one busy CPU, drained from another ---- */

static int hot_cpu, drain_cpu;
static volatile int hot_stop;
static unsigned long hot_ops;
static bool hot_pinned;
static struct drain_count hot_drained;

/* Drain hot_cpu's heap from drain_cpu for HOT_MS, then stop the worker. */
static void hot_drainer(void)
{
    PCM_CHECK(pcm_test_pin(drain_cpu), "cannot pin the drainer to CPU %d", drain_cpu);
    /* This CPU's heap ready too: when the drains keep the worker off its
     * own heap's lock, it takes objects here, and frees them through its
     * CPU's outgoing lists (rseq path) - which the drains empty as well. */
    pcm_free(pcm_malloc(16));
    unsigned i = (unsigned)hot_cpu % pcm_heap_count;
    uint64_t end = pcm_test_clock_ns() + pcm_test_scale(HOT_MS) * 1000000ull;
    while (pcm_test_clock_ns() < end)
        if (pcm_heap_is_ready(i))
            drain_heap(i, &hot_drained, "hot drainer");
    __atomic_store_n(&hot_stop, 1, __ATOMIC_RELEASE);
}

/* 16..32 bytes: tiny, so that the hot thread spends as much of its time
 * in sections as it can (with up to 256 bytes, the checks diluted them:
 * the missing fence went unnoticed in 3 runs of 4). */
static size_t tiny_size(uint64_t *rng)
{
    return 16 + (size_t)(pcm_test_rand(rng) % 17);
}

/* Allocate and free on hot_cpu until stopped, HOT_LIVE objects at most. */
static void hot_worker(unsigned index)
{
    void *live[HOT_LIVE] = {0};
    uint64_t rng = pcm_test_seed() * 2 + 1, serial = 0;
    hot_pinned = pcm_test_pin(hot_cpu);
    while (hot_pinned && !__atomic_load_n(&hot_stop, __ATOMIC_ACQUIRE)) {
        unsigned i = (unsigned)(pcm_test_rand(&rng) % HOT_LIVE);
        if (!live[i]) {
            live[i] = object_new(tiny_size(&rng), serial++);
            if (!live[i]) {
                PCM_CHECK(false, "out of memory");
                break;
            }
        } else if (object_check_free(live[i], index)) {
            live[i] = NULL;
        } else {
            break;
        }
        hot_ops++;
    }
    for (unsigned i = 0; i < HOT_LIVE; i++)
        if (live[i])
            object_check_free(live[i], index);
}

static void hot_thread(void *arg, unsigned index)
{
    (void)arg;
    /* The drainer first: it stops the worker, so a worker that could not
     * start leaves no one waiting. */
    if (index == 0)
        hot_drainer();
    else
        hot_worker(index);
}

/* What the drains left on cpu's heap: drained once more, then a batch of
 * the hot thread's sizes from there. */
static void sweep(int cpu, uint64_t *rng)
{
    if (!pcm_test_pin(cpu)) {
        PCM_CHECK(false, "cannot pin to CPU %d", cpu);
        return;
    }
    unsigned i = (unsigned)cpu % pcm_heap_count;
    struct drain_count n = {0, 0, false};
    if (pcm_heap_is_ready(i))
        drain_heap(i, &n, "sweep");
    struct batch_result r = batch(BATCH, tiny_size, rng, "sweep");
    pcm_test_printf("  CPU %d drained again: %u objects, %u whole, %u overlapping\n", cpu, r.made, r.intact,
                    r.overlaps);
}

PCM_TEST(cache_drain_hot_cpu)
{
    pcm_free(pcm_malloc(1));
    bool rseq = pcm_fast_path_is_rseq(), fence = fence_works();
    pcm_test_allowed_cpus(&drain_cpu, &hot_cpu);
    PCM_REQUIRE(drain_cpu >= 0, "no CPU to run on");
    cpu_set_t saved;
    PCM_REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0, "sched_getaffinity failed");
    hot_stop = 0;
    PCM_CHECK(pcm_test_run_workers(2, hot_thread, NULL) == 0, "threads did not start");
    PCM_CHECK(hot_pinned, "cannot pin the worker to CPU %d", hot_cpu);
    pcm_test_printf("  CPU %d: %lu operations; drained from CPU %d: %lu drains took objects, of %lu (fast path %s)\n",
                    hot_cpu, hot_ops, drain_cpu, hot_drained.took, hot_drained.calls, pcm_fast_path_name());
    PCM_CHECK(hot_ops > 0, "the worker did nothing");
    if (fence && hot_ops > 0)
        PCM_CHECK(hot_drained.took > 0, "%lu drains of a busy CPU's caches, none took anything", hot_drained.calls);
    else if (rseq && !fence)
        PCM_CHECK(hot_drained.took == 0, "%lu drains took objects without the fence they need", hot_drained.took);
    uint64_t rng = pcm_test_seed() | 1;
    sweep(hot_cpu, &rng);
    if (drain_cpu != hot_cpu)
        sweep(drain_cpu, &rng);
    sched_setaffinity(0, sizeof saved, &saved);
}

/* ---- one CPU's cache, filled, drained from elsewhere, used again ---- */

static int fill_cpu;
static bool fill_pinned;
static void *refreshed; /* the object allocated and freed after the drain */

/* On fill_cpu: FILL_OBJECTS objects allocated, checked and freed there,
 * all into its cache (it starts with room for them and a refill's
 * leftovers). */
static void fill_cache(void *arg, unsigned index)
{
    (void)arg;
    static void *objects[FILL_OBJECTS];
    fill_pinned = pcm_test_pin(fill_cpu);
    if (!fill_pinned)
        return;
    for (unsigned i = 0; i < FILL_OBJECTS; i++) {
        objects[i] = object_new(FILL_SIZE, 0xF111000000ull | i);
        PCM_REQUIRE(objects[i], "out of memory");
    }
    for (unsigned i = 0; i < FILL_OBJECTS; i++)
        object_check_free(objects[i], index);
}

/* On fill_cpu again, after the drain: one object. */
static void use_again(void *arg, unsigned index)
{
    (void)arg;
    fill_pinned = pcm_test_pin(fill_cpu);
    if (!fill_pinned)
        return;
    refreshed = object_new(FILL_SIZE, 0xA6A1000000ull);
    PCM_REQUIRE(refreshed, "out of memory");
    object_check_free(refreshed, index);
}

PCM_TEST(cache_drain_of_a_pinned_cpu)
{
    pcm_free(pcm_malloc(1));
    bool rseq = pcm_fast_path_is_rseq(), fence = !rseq || fence_works();
    unsigned cls = pcm_size_class(FILL_SIZE);
    PCM_REQUIRE(pcm_bin_shapes[cls].start >= FILL_OBJECTS + 64, "the %u-byte cache starts at %u", FILL_SIZE,
                pcm_bin_shapes[cls].start);
    int first, last;
    pcm_test_allowed_cpus(&first, &last);
    PCM_REQUIRE(first >= 0, "no CPU to run on");
    cpu_set_t saved;
    PCM_REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0, "sched_getaffinity failed");
    PCM_REQUIRE(pcm_test_pin(first), "cannot pin to CPU %d", first);
    fill_cpu = last;
    /* The heap of a CPU: its number on the rseq path, modulo the heaps
     * on the CAS path (pcm_heap_current_index). */
    struct pcm_heap *h = &pcm_heaps[(unsigned)fill_cpu % pcm_heap_count];
    volatile pcm_word_t *top = &h->bins[cls].cache.half.ptr;

    PCM_CHECK(pcm_test_run_workers(1, fill_cache, NULL) == 0, "the filling thread did not start");
    PCM_CHECK(fill_pinned, "cannot pin a thread to CPU %d", fill_cpu);
    if (!fill_pinned || !pcm_bin_listed_hint(&h->bins[cls])) {
        PCM_CHECK(!fill_pinned, "CPU %d's %u-byte cache is empty after %u frees there", fill_cpu, FILL_SIZE,
                  FILL_OBJECTS);
        sched_setaffinity(0, sizeof saved, &saved);
        return;
    }

    pcm_heap_lock(h);
    pcm_word_t returned = h->stats.returned[cls];
    bool took = pcm_decay_drain_caches_locked(h);
    returned = h->stats.returned[cls] - returned;
    int listed = list_not_empty(h);
    int closed = rseq ? limit_not_open(h) : -1;
    pcm_heap_unlock(h);
    pcm_test_printf("  %s path: CPU %d's caches drained from CPU %d: %s, %lu objects of %u bytes back in their "
                    "spans\n",
                    pcm_fast_path_name(), fill_cpu, first, took ? "took objects" : "took nothing",
                    (unsigned long)returned, FILL_SIZE);
    if (fence) {
        PCM_CHECK(took, "the drain of CPU %d took nothing from a cache of %u objects", fill_cpu, FILL_OBJECTS);
        PCM_CHECK(!pcm_bin_listed_hint(&h->bins[cls]), "CPU %d's %u-byte cache still holds objects after the drain", fill_cpu,
                  FILL_SIZE);
        PCM_CHECK(listed < 0, "CPU %d's list %d still holds objects after the drain", fill_cpu, listed);
        PCM_CHECK(returned >= FILL_OBJECTS, "%lu objects back in their spans, %u were cached",
                  (unsigned long)returned, FILL_OBJECTS);
    } else {
        PCM_CHECK(!took, "the drain took objects without the membarrier fence it needs");
    }
    PCM_CHECK(closed < 0, "CPU %d's list %d not reopened after the drain", fill_cpu, closed);

    /* The cache works as before: a refill, and the freed object on top. */
    PCM_CHECK(pcm_test_run_workers(1, use_again, NULL) == 0, "the thread did not start");
    PCM_CHECK(refreshed != NULL, "no object allocated on CPU %d after the drain", fill_cpu);
    PCM_CHECK(pcm_load_relaxed(top) == (pcm_word_t)refreshed,
              "CPU %d's cache top is %p, not %p, the object freed there", fill_cpu, (void *)pcm_load_relaxed(top),
              refreshed);
    sched_setaffinity(0, sizeof saved, &saved);
}
