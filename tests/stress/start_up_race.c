/*
 * tests/stress/start_up_race.c - threads whose first mallocs race with
 * start-up, in fresh processes (this binary run again, once per round).
 *
 * A malloc that reads the fast path before start-up has chosen it - the
 * one that runs start-up, and those that arrive while it runs - takes
 * the CAS path's way in (malloc_fast.h: small_alloc_cas).  On the rseq
 * path it must not go on with that path's CAS pop and refill: the caches
 * are already the rseq sections' (percpu_rseq.h), whose commit is a
 * plain store that a CAS from another CPU does not see, and which keep no
 * tag for a CAS to see them by.  It did: a CAS pop from CPU a on CPU b's
 * cache between an rseq pop's load and its commit handed the same object
 * out twice, and a stale link committed by either planted an object in
 * use back in the cache; its first word - the program's data - was later
 * followed as a link.  Here that showed in about one process in six (2
 * cores, x86_64 and i386 natively) as an object changed while in use, a
 * crash or a list that looped; CI's i386 VM once showed it as a 1-byte
 * object on the shared LIFO changed (tests/stress/producer_consumer.c,
 * its first test, whose workers make the process's first mallocs), then
 * a hang.  tests/unit/rseq_start_up.c checks the cause without luck (no
 * cache slot written by a CAS); this checks the effect.
 *
 * Each round: a fresh process (a child running this binary with
 * PCM_TEST_START_UP_CHILD set, so its mallocs are its first) whose
 * threads, released together, share a LIFO of tiny objects (1..16 bytes,
 * the 16-byte class, where they collide on one cache slot), each pushing
 * objects it filled with pattern.h's pattern or popping, checking and
 * freeing another's, as workload 4 does (design.md).  A round fails on
 * a changed object (exit status 1), on any signal (SIGSEGV, SIGABRT from
 * a misuse check) or on the watchdog (SIGALRM: a loop).  Skipped where
 * the path is not rseq (qemu-user, PCMALLOC_RSEQ=0, generic and hardened
 * builds): start-up then chooses the CAS path itself.  PCM_TEST_SCALE
 * scales the rounds.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "fast_path.h"
#include "pattern.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_ENV "PCM_TEST_START_UP_CHILD"
#define ROUNDS 32ul
#define THREADS 8u
#define OPS_PER_THREAD 2000ul
#define LIFO_CAPACITY 1024u
#define WATCHDOG_S 60u
#define ARGS_MAX 64u

/* ---- the child: one round ---- */

struct item {
    unsigned char *p;
    size_t size;
    uint64_t tag;
};

static struct {
    pthread_mutex_t lock;
    unsigned depth;
    struct item items[LIFO_CAPACITY];
    volatile unsigned arrived;
    volatile int bad;
} lifo = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool intact(const struct item *it, unsigned thread)
{
    size_t bad = pcm_pattern_check(it->p, it->size, it->tag);
    if (bad == PCM_PATTERN_OK)
        return true;
    pcm_test_printf("  child: thread %u: object %p (%zu bytes) changed: byte %zu is 0x%x, expected 0x%x\n", thread,
                    (void *)it->p, it->size, bad, it->p[bad], pcm_pattern_expected(it->p, it->size, it->tag, bad));
    lifo.bad = 1;
    return false;
}

static void *child_thread(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg;
    uint64_t rng = pcm_pattern_mix(pcm_test_seed() + index) | 1;
    unsigned push_percent = index % 2 ? 30 : 70;
    /* Released together: their first mallocs meet start-up. */
    __atomic_fetch_add(&lifo.arrived, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&lifo.arrived, __ATOMIC_SEQ_CST) < THREADS)
        sched_yield();
    for (unsigned long n = 0; n < OPS_PER_THREAD && !lifo.bad; n++) {
        struct item it;
        if (pcm_test_rand(&rng) % 100 < push_percent) {
            it.size = 1 + (size_t)(pcm_test_rand(&rng) % 16);
            it.tag = ((uint64_t)(index + 1) << 40) | n;
            it.p = pcm_malloc(it.size);
            if (!it.p) {
                pcm_test_printf("  child: thread %u: malloc(%zu) failed\n", index, it.size);
                lifo.bad = 1;
                break;
            }
            pcm_pattern_fill(it.p, it.size, it.tag);
            pthread_mutex_lock(&lifo.lock);
            bool room = lifo.depth < LIFO_CAPACITY;
            if (room)
                lifo.items[lifo.depth++] = it;
            pthread_mutex_unlock(&lifo.lock);
            if (!room && intact(&it, index))
                pcm_free(it.p);
        } else {
            pthread_mutex_lock(&lifo.lock);
            bool any = lifo.depth > 0;
            if (any)
                it = lifo.items[--lifo.depth];
            pthread_mutex_unlock(&lifo.lock);
            if (any && intact(&it, index))
                pcm_free(it.p); /* (a changed one stays out: it may be handed out twice) */
        }
    }
    return NULL;
}

static int child_round(void)
{
    pthread_t threads[THREADS];
    unsigned started = 0;
    for (; started < THREADS; started++)
        if (pthread_create(&threads[started], NULL, child_thread, (void *)(uintptr_t)started))
            break;
    if (started < THREADS) { /* (the others wait for all of them) */
        pcm_test_printf("  child: could start only %u threads\n", started);
        _exit(3);
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    for (unsigned i = 0; i < lifo.depth && !lifo.bad; i++)
        intact(&lifo.items[i], THREADS);
    return lifo.bad ? 1 : 0;
}

/* ---- the parent: the rounds ---- */

/* This process's command line (the binary, or the loader and the
 * binary), to run it again through /proc/self/exe. */
static bool own_command(char *buf, size_t size, char *argv[ARGS_MAX])
{
    size_t len = pcm_test_read_file("/proc/self/cmdline", buf, size);
    if (len == 0 || len >= size - 1)
        return false;
    unsigned argc = 0;
    for (size_t i = 0; i < len && argc < ARGS_MAX - 1; i += strlen(buf + i) + 1)
        argv[argc++] = buf + i;
    argv[argc] = NULL;
    return argc > 0;
}

PCM_TEST(start_up_race_leaves_no_object_handed_out_twice)
{
    if (pcm_test_getenv(CHILD_ENV)) {
        /* (the harness made no pcm_* call before this: these threads' mallocs are the process's first) */
        fflush(stdout);
        _exit(child_round());
    }
    pcm_free(pcm_malloc(1));
    if (!pcm_fast_path_is_rseq()) {
        pcm_test_printf("  not the rseq path (%s): start-up chooses the CAS path itself\n", pcm_fast_path_reason());
        return;
    }
    static char command[4096];
    char *argv[ARGS_MAX];
    PCM_REQUIRE(own_command(command, sizeof command, argv), "cannot read /proc/self/cmdline");
    unsigned long rounds = pcm_test_scale(ROUNDS), done = 0;
    for (; done < rounds; done++) {
        fflush(stdout);
        pid_t pid = fork();
        PCM_REQUIRE(pid >= 0, "fork failed");
        if (pid == 0) {
            setenv(CHILD_ENV, "1", 1);
            setenv("PCM_TEST_FILTER", "start_up_race_leaves_no_object_handed_out_twice", 1);
            alarm(WATCHDOG_S); /* (kept across the exec) */
            execv("/proc/self/exe", argv);
            _exit(4);
        }
        int status;
        PCM_REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid failed");
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (WIFSIGNALED(status))
            PCM_CHECK(0, "round %lu: the child died of signal %d%s", done + 1, WTERMSIG(status),
                      WTERMSIG(status) == SIGALRM ? " (its watchdog: a loop)" : "");
        else
            PCM_CHECK(0, "round %lu: the child exited with status %d%s", done + 1, WEXITSTATUS(status),
                      WEXITSTATUS(status) == 1 ? " (an object changed while in use)" : "");
        break;
    }
    pcm_test_printf("  %lu of %lu rounds of %u threads whose first mallocs met start-up: clean\n",
                    done, rounds, THREADS);
}
