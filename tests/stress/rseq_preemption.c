/*
 * tests/stress/rseq_preemption.c - the per-CPU fast path under constant
 * interruption: more threads than CPUs (so the scheduler preempts and
 * migrates them mid-operation) and a per-thread timer firing every 20
 * microseconds (so signals land inside the restartable sections; every
 * millisecond on the CAS path).  On the rseq path every such landing aborts a
 * section and the code starts it again; the test proves restarts happened
 * (pcm_fast_path_restarts) and that nothing was lost or handed out twice:
 * every object carries a header naming its size and tag and the pattern
 * of pattern.h over the rest, checked completely before it is freed.
 * Threads also swap objects through a shared exchange, so a third of the
 * frees are cross-CPU (remote) frees.
 *
 * On the CAS path (PCMALLOC_RSEQ=0, qemu-user) the same torture runs; only
 * the restart count is not required.  PCM_TEST_EXPECT_FAST_PATH (rseq or
 * cas, set by the runner) makes a run fail when the other path ran.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "fast_path.h"
#include "pattern.h"

#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 256u
#define EXCHANGE_SLOTS 64u
#define OPS_PER_THREAD 150000ul
/* Wall clock: high-resolution, fires while the thread waits too.  Every
 * 20 us on the rseq path; every 1 ms on the CAS path, which has no
 * sections to abort - there the signals only interrupt CAS loops, and a
 * flood of them would stall an emulator (qemu-user) for minutes. */
#define TIMER_NS_RSEQ 20000l
#define TIMER_NS_CAS 1000000l

struct header {
    size_t size;
    uint64_t tag;
};

static void **exchange;      /* shared: EXCHANGE_SLOTS objects in flight */
static volatile long signals; /* received, all threads */
static unsigned long ops;

static void on_timer(int sig)
{
    (void)sig;
    __atomic_fetch_add(&signals, 1, __ATOMIC_RELAXED);
}

/* Mostly tiny sizes (allocation, not the pattern, dominates the time),
 * some up to 256 bytes, a few up to 4 KiB. */
static size_t random_size(uint64_t *rng)
{
    unsigned pick = (unsigned)(pcm_test_rand(rng) % 16);
    size_t max = pick < 10 ? 48 : pick < 15 ? 256 : 4096;
    return sizeof(struct header) + (size_t)(pcm_test_rand(rng) % max);
}

static void *object_new(uint64_t *rng, uint64_t tag)
{
    size_t size = random_size(rng);
    struct header *h = pcm_malloc(size);
    if (!h)
        return NULL;
    h->size = size;
    h->tag = tag;
    pcm_pattern_fill(h + 1, size - sizeof *h, tag);
    return h;
}

/* Check every byte, then free. */
static bool object_check_free(void *p, unsigned thread)
{
    struct header *h = p;
    size_t size = h->size, bad = PCM_PATTERN_OK;
    if (size < sizeof *h || size > sizeof *h + 4096)
        bad = 0;
    else
        bad = pcm_pattern_check(h + 1, size - sizeof *h, h->tag);
    PCM_CHECK(bad == PCM_PATTERN_OK, "thread %u of %u: object %p (size %zu, tag %llx) corrupt at byte %zu", thread,
              pcm_test_threads(), p, size, (unsigned long long)h->tag, bad);
    if (bad != PCM_PATTERN_OK)
        return false;
    pcm_free(p);
    return true;
}

static bool start_timer(timer_t *timer)
{
    struct sigevent event;
    memset(&event, 0, sizeof event);
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = SIGPROF;
    event._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &event, timer))
        return false;
    long ns = pcm_fast_path_is_rseq() ? TIMER_NS_RSEQ : TIMER_NS_CAS;
    struct itimerspec every = {{0, ns}, {0, ns}};
    return timer_settime(*timer, 0, &every, NULL) == 0;
}

static void worker(void *arg, unsigned index)
{
    (void)arg;
    uint64_t rng = pcm_test_seed() * 2 + 1 + index * 0x9E3779B97F4A7C15ull;
    void *slots[SLOTS] = {0};
    uint64_t serial = 0;
    timer_t timer;
    PCM_REQUIRE(start_timer(&timer), "thread %u: timer_create failed", index);
    for (unsigned long op = 0; op < ops; op++) {
        unsigned i = (unsigned)(pcm_test_rand(&rng) % SLOTS);
        if (!slots[i]) {
            slots[i] = object_new(&rng, ((uint64_t)index << 40) | serial++);
            PCM_REQUIRE(slots[i], "thread %u: out of memory", index);
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
    timer_delete(timer);
    for (unsigned i = 0; i < SLOTS; i++)
        if (slots[i])
            object_check_free(slots[i], index);
}

PCM_TEST(rseq_preemption_torture)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_timer;
    action.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &action, NULL);

    pcm_free(pcm_malloc(1)); /* start-up: the fast path is chosen */
    const char *expect = pcm_test_getenv("PCM_TEST_EXPECT_FAST_PATH");
    if (expect)
        PCM_CHECK(strcmp(expect, pcm_fast_path_name()) == 0, "fast path %s, expected %s (%s)", pcm_fast_path_name(),
                  expect, pcm_fast_path_reason());

    exchange = pcm_test_shared_alloc(EXCHANGE_SLOTS * sizeof *exchange);
    PCM_REQUIRE(exchange, "no shared memory");
    ops = pcm_test_scale(OPS_PER_THREAD);
    pcm_word_t restarts_before = pcm_fast_path_restarts();
    unsigned threads = pcm_test_threads();
    PCM_CHECK(pcm_test_run_workers(threads, worker, NULL) == 0, "workers did not start");
    for (unsigned e = 0; e < EXCHANGE_SLOTS; e++)
        if (exchange[e])
            object_check_free(exchange[e], threads);
    pcm_word_t restarts = pcm_fast_path_restarts() - restarts_before;

    signal(SIGPROF, SIG_IGN);
    pcm_test_printf("  %u threads, %lu operations each, %ld timer signals, %lu restarted sections (fast path %s)\n",
                    threads, ops, (long)signals, (unsigned long)restarts, pcm_fast_path_name());
    PCM_CHECK(signals > 0, "no timer signal arrived: the torture interrupted nothing");
    if (pcm_fast_path_is_rseq())
        PCM_CHECK(restarts > 0, "%ld signals and %u threads, yet no section was restarted", (long)signals, threads);
    pcm_test_shared_free(exchange, EXCHANGE_SLOTS * sizeof *exchange);
}
