/*
 * tests/stress/producer_consumer.c - objects allocated by one thread and
 * freed by another: every free is a cross-thread free.
 *
 * Pairs of threads: the producer allocates objects of random small sizes,
 * fills each with its pattern (pattern.h) and passes it through a bounded
 * single-producer single-consumer ring to its consumer, which checks the
 * object completely, checks it is the next one its producer sent (nothing
 * lost, duplicated or reordered) and frees it (every other one with
 * pcm_free_sized).  Run twice:
 *   - unpinned: producer and consumer usually run on different CPUs, so
 *     the frees go to the owner heap's remote-free stack;
 *   - pinned: every thread on one CPU (the lowest the process may use,
 *     CPU 0 on a normal machine), so producer and consumer share a heap
 *     and are preempted in the middle of each other's pops and pushes -
 *     the case that made allocators with poor locks collapse (design.md,
 *     workload 4).
 * And workload 4 itself: threads sharing one LIFO (a mutex-protected
 * stack), each pushing objects it allocated or popping and freeing
 * objects another thread allocated: even threads mostly push, odd ones
 * mostly pop, so most pops take another thread's object.
 *
 * A failed check names the pair or thread, the thread count and (the
 * harness adds it) the seed; the run then stops.  PCM_TEST_SCALE scales
 * the object counts.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "pattern.h"

#include <pthread.h>
#include <sched.h>

#define RING_SIZE 256u
#define OBJECTS_PER_PAIR 50000ul
#define LIFO_CAPACITY 4096u
#define LIFO_OPS_PER_THREAD 50000ul

struct item {
    void *p;
    size_t size;
    uint64_t tag;
};

/* Mostly tiny, some up to 1 KiB, a few up to 8 KiB. */
static size_t random_small_size(uint64_t *rng)
{
    unsigned pick = (unsigned)(pcm_test_rand(rng) % 10);
    size_t max = pick < 6 ? 128 : pick < 9 ? 1024 : 8192;
    return 1 + (size_t)(pcm_test_rand(rng) % max);
}

/* Spin a little, then let the other threads of this CPU run. */
static void wait_a_little(unsigned *spins)
{
    if (++*spins % 64 == 0)
        pcm_test_yield();
}

static bool item_new(uint64_t *rng, uint64_t tag, struct item *it)
{
    it->size = random_small_size(rng);
    it->tag = tag;
    it->p = pcm_malloc(it->size);
    if (!it->p)
        return false;
    pcm_pattern_fill(it->p, it->size, tag);
    return true;
}

/* The lowest CPU this process may run on, or -1. */
static int first_allowed_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set))
        return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set))
            return cpu;
    return -1;
}

static bool pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* ---- producer / consumer pairs ---- */

struct ring {
    struct item items[RING_SIZE];
    /* Each index written by one side only; the other side reads it with
     * acquire, so it sees the item (or the free cell) the index covers. */
    unsigned long head __attribute__((aligned(64))); /* next to take (consumer) */
    unsigned long tail __attribute__((aligned(64))); /* next to fill (producer) */
};

struct pairs {
    unsigned threads;
    unsigned long per_pair;
    uint64_t seed;
    int pin_cpu; /* -1: not pinned */
    struct ring *rings;
    unsigned long consumed, sized_frees;
    int stop;
};

static bool stopped(struct pairs *run)
{
    return __atomic_load_n(&run->stop, __ATOMIC_RELAXED);
}

static void producer(struct pairs *run, unsigned pair)
{
    struct ring *ring = &run->rings[pair];
    uint64_t rng = pcm_pattern_mix(run->seed + pair) | 1;
    for (unsigned long n = 0; n < run->per_pair; n++) {
        struct item it;
        uint64_t tag = ((uint64_t)(pair + 1) << 40) | n;
        if (!item_new(&rng, tag, &it)) {
            PCM_CHECK(0, "pair %u: malloc(%zu) failed (%u threads)", pair, it.size, run->threads);
            __atomic_store_n(&run->stop, 1, __ATOMIC_RELAXED);
            return;
        }
        unsigned spins = 0;
        while (n - __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) >= RING_SIZE) {
            if (stopped(run))
                return;
            wait_a_little(&spins);
        }
        ring->items[n % RING_SIZE] = it;
        __atomic_store_n(&ring->tail, n + 1, __ATOMIC_RELEASE);
    }
}

static void consumer(struct pairs *run, unsigned pair)
{
    struct ring *ring = &run->rings[pair];
    for (unsigned long n = 0; n < run->per_pair; n++) {
        unsigned spins = 0;
        while (__atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE) == n) {
            if (stopped(run))
                return;
            wait_a_little(&spins);
        }
        struct item it = ring->items[n % RING_SIZE];
        __atomic_store_n(&ring->head, n + 1, __ATOMIC_RELEASE);
        uint64_t expected_tag = ((uint64_t)(pair + 1) << 40) | n;
        size_t bad = pcm_pattern_check(it.p, it.size, it.tag);
        if (it.tag != expected_tag || bad != PCM_PATTERN_OK) {
            PCM_CHECK(it.tag == expected_tag, "pair %u: object %lu arrived as tag %llx (%u threads)", pair,
                      n, (unsigned long long)it.tag, run->threads);
            PCM_CHECK(bad == PCM_PATTERN_OK,
                      "pair %u: object %lu at %p, %zu bytes: byte %zu is 0x%x, expected 0x%x (%u threads%s)",
                      pair, n, it.p, it.size, bad, bad == PCM_PATTERN_OK ? 0u : ((unsigned char *)it.p)[bad],
                      bad == PCM_PATTERN_OK ? 0u : pcm_pattern_expected(it.p, it.size, it.tag, bad),
                      run->threads, run->pin_cpu >= 0 ? ", pinned" : "");
            __atomic_store_n(&run->stop, 1, __ATOMIC_RELAXED);
            return; /* the object stays allocated: it may be handed out twice */
        }
        if (n % 2) {
            pcm_free_sized(it.p, it.size);
            __atomic_fetch_add(&run->sized_frees, 1, __ATOMIC_RELAXED);
        } else {
            pcm_free(it.p);
        }
        __atomic_fetch_add(&run->consumed, 1, __ATOMIC_RELAXED);
    }
}

static void pair_worker(void *arg, unsigned index)
{
    struct pairs *run = arg;
    if (run->pin_cpu >= 0 && !pin_to(run->pin_cpu)) {
        PCM_CHECK(0, "thread %u: cannot pin to CPU %d", index, run->pin_cpu);
        __atomic_store_n(&run->stop, 1, __ATOMIC_RELAXED);
        return;
    }
    if (index % 2)
        consumer(run, index / 2);
    else
        producer(run, index / 2);
}

static void producer_consumer(bool pinned)
{
    struct pairs run;
    memset(&run, 0, sizeof run);
    unsigned pairs = pcm_test_threads() / 2;
    if (pairs == 0)
        pairs = 1;
    run.threads = pairs * 2;
    run.per_pair = pcm_test_scale(OBJECTS_PER_PAIR);
    run.seed = pcm_test_seed() * 0x9E3779B97F4A7C15ull + pinned;
    run.pin_cpu = -1;
    if (pinned) {
        run.pin_cpu = first_allowed_cpu();
        PCM_REQUIRE(run.pin_cpu >= 0, "no CPU in this process's affinity mask");
    }
    size_t ring_bytes = pairs * sizeof(struct ring);
    run.rings = pcm_test_shared_alloc(ring_bytes);
    PCM_REQUIRE(run.rings, "cannot map %u rings", pairs);

    uint64_t start = pcm_test_clock_ns();
    pcm_test_run_workers(run.threads, pair_worker, &run);
    uint64_t ns = pcm_test_clock_ns() - start;

    if (!run.stop) {
        PCM_CHECK(run.consumed == pairs * run.per_pair, "%lu of %lu objects consumed (%u threads)",
                  run.consumed, pairs * run.per_pair, run.threads);
        pcm_test_printf("  %u pairs%s: %lu objects freed by the other thread (%lu by free_sized), %lu.%02lu s\n",
                        pairs, pinned ? " on one CPU" : "", run.consumed, run.sized_frees,
                        (unsigned long)(ns / 1000000000u), (unsigned long)(ns / 10000000u % 100));
    } else {
        /* Free what the producers left in the rings, if it is intact. */
        for (unsigned pair = 0; pair < pairs; pair++) {
            struct ring *ring = &run.rings[pair];
            for (unsigned long n = ring->head; n < ring->tail; n++) {
                struct item it = ring->items[n % RING_SIZE];
                if (pcm_pattern_check(it.p, it.size, it.tag) == PCM_PATTERN_OK)
                    pcm_free(it.p);
            }
        }
    }
    pcm_test_shared_free(run.rings, ring_bytes);
}

PCM_TEST(producer_consumer_unpinned)
{
    producer_consumer(false);
}

PCM_TEST(producer_consumer_pinned_to_one_cpu)
{
    producer_consumer(true);
}

/* ---- workload 4: threads sharing a LIFO ---- */

struct lifo {
    pthread_mutex_t lock;
    unsigned depth;
    struct item items[LIFO_CAPACITY];
    unsigned threads;
    unsigned long ops_per_thread;
    uint64_t seed;
    unsigned long pushed, popped, popped_from_other;
    int stop;
};

static void lifo_worker(void *arg, unsigned index)
{
    struct lifo *lifo = arg;
    uint64_t rng = pcm_pattern_mix(lifo->seed + index) | 1;
    unsigned push_percent = index % 2 ? 25 : 75;
    for (unsigned long n = 0; n < lifo->ops_per_thread; n++) {
        if (__atomic_load_n(&lifo->stop, __ATOMIC_RELAXED))
            return;
        if (n % 128 == 127)
            pcm_test_yield(); /* interleave the threads, even on few cores */
        struct item it;
        if (pcm_test_rand(&rng) % 100 < push_percent) {
            uint64_t tag = ((uint64_t)(index + 1) << 40) | n;
            if (!item_new(&rng, tag, &it)) {
                PCM_CHECK(0, "thread %u: malloc(%zu) failed (%u threads)", index, it.size, lifo->threads);
                __atomic_store_n(&lifo->stop, 1, __ATOMIC_RELAXED);
                return;
            }
            pthread_mutex_lock(&lifo->lock);
            bool room = lifo->depth < LIFO_CAPACITY;
            if (room) {
                lifo->items[lifo->depth++] = it;
                lifo->pushed++;
            }
            pthread_mutex_unlock(&lifo->lock);
            if (!room)
                pcm_free(it.p);
        } else {
            pthread_mutex_lock(&lifo->lock);
            bool any = lifo->depth > 0;
            if (any) {
                it = lifo->items[--lifo->depth];
                lifo->popped++;
                lifo->popped_from_other += (it.tag >> 40) != index + 1u;
            }
            pthread_mutex_unlock(&lifo->lock);
            if (!any)
                continue;
            size_t bad = pcm_pattern_check(it.p, it.size, it.tag);
            if (bad != PCM_PATTERN_OK) {
                PCM_CHECK(bad == PCM_PATTERN_OK,
                          "thread %u: object %p, %zu bytes, tag %llx: byte %zu is 0x%x, expected 0x%x "
                          "(%u threads)",
                          index, it.p, it.size, (unsigned long long)it.tag, bad, ((unsigned char *)it.p)[bad],
                          pcm_pattern_expected(it.p, it.size, it.tag, bad), lifo->threads);
                __atomic_store_n(&lifo->stop, 1, __ATOMIC_RELAXED);
                return;
            }
            pcm_free(it.p);
        }
    }
}

PCM_TEST(shared_lifo_many_threads)
{
    struct lifo *lifo = pcm_test_shared_alloc(sizeof *lifo);
    PCM_REQUIRE(lifo, "cannot map the LIFO");
    pthread_mutex_init(&lifo->lock, NULL);
    lifo->threads = pcm_test_threads();
    lifo->ops_per_thread = pcm_test_scale(LIFO_OPS_PER_THREAD);
    lifo->seed = pcm_test_seed() * 0x9E3779B97F4A7C15ull + 2;

    uint64_t start = pcm_test_clock_ns();
    pcm_test_run_workers(lifo->threads, lifo_worker, lifo);
    uint64_t ns = pcm_test_clock_ns() - start;

    unsigned left = lifo->depth;
    if (!lifo->stop) {
        for (unsigned i = 0; i < lifo->depth; i++) {
            struct item it = lifo->items[i];
            size_t bad = pcm_pattern_check(it.p, it.size, it.tag);
            PCM_CHECK(bad == PCM_PATTERN_OK, "object %p (%zu bytes, tag %llx) left on the LIFO: byte %zu is 0x%x, "
                      "expected 0x%x", it.p, it.size, (unsigned long long)it.tag, bad, ((unsigned char *)it.p)[bad],
                      pcm_pattern_expected(it.p, it.size, it.tag, bad));
            if (bad == PCM_PATTERN_OK)
                pcm_free(it.p);
        }
        pcm_test_printf("  %u threads: %lu pushed, %lu popped (%lu allocated by another thread), %u left, "
                        "%lu.%02lu s\n",
                        lifo->threads, lifo->pushed, lifo->popped, lifo->popped_from_other, left,
                        (unsigned long)(ns / 1000000000u), (unsigned long)(ns / 10000000u % 100));
    }
    pthread_mutex_destroy(&lifo->lock);
    pcm_test_shared_free(lifo, sizeof *lifo);
}
