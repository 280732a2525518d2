/*
 * tests/preload/fork.c - fork in a multi-threaded program whose malloc is
 * pcmalloc (run with LD_PRELOAD=libpcmalloc.so; see preloaded.h).
 *
 * Four threads allocate, check and free in a loop while the main thread
 * forks FORKS times.  A fork can land while another thread is anywhere in
 * malloc or free - in a per-CPU pop, a remote push, a refill holding a
 * heap lock: the child has only the forking thread, so a lock held at the
 * fork would stay taken there forever.  Each child checks and frees
 * objects its parent allocated before the fork, allocates and frees
 * objects small and large, checks that malloc is still pcmalloc's, every
 * fifth one forks a grandchild that does the same, and exits 0.  (Not a
 * thread in the child: qemu-user 7.2 aborts on a thread created in the
 * child of a multi-threaded process - "qemu_plugin_vcpu_init_hook:
 * assertion failed" - whatever the allocator.)  The parent keeps
 * allocating meanwhile, then checks that every child exited 0 and that its
 * own objects are intact.
 *
 * No deadlock: alarm() is the watchdog, in the parent (WATCHDOG_PARENT s)
 * and in each child (WATCHDOG_CHILD s, set first thing after the fork);
 * a stuck child dies of SIGALRM and the parent names it.
 */
#include "preloaded.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKS 50u
#define CHURN_THREADS 4u
#define KEPT 64u
#define RING 64u
#define WATCHDOG_PARENT 100u
#define WATCHDOG_CHILD 30u

enum child_exit {
    CHILD_OK = 0,
    CHILD_PARENT_OBJECT_CHANGED = 1,
    CHILD_NOT_PCMALLOC = 2,
    CHILD_OWN_OBJECT_CHANGED = 3,
    CHILD_GRANDCHILD_FAILED = 4,
    CHILD_OUT_OF_MEMORY = 5,
};

struct object {
    unsigned char *p;
    size_t size;
    unsigned char value;
};

/* Objects the parent allocates before forking: every child checks and
 * frees half of them (its copy); the parent frees them at the end. */
static struct object kept[KEPT];
static int stop_churn;

static bool object_new(struct object *o, size_t size, unsigned char value)
{
    o->p = malloc(size);
    o->size = size;
    o->value = value;
    if (o->p)
        memset(o->p, value, size);
    return o->p != NULL;
}

static bool object_intact(const struct object *o)
{
    for (size_t i = 0; i < o->size; i++)
        if (o->p[i] != o->value)
            return false;
    return true;
}

static size_t random_size(uint64_t *rng)
{
    unsigned pick = (unsigned)(pcm_test_rand(rng) % 100);
    size_t max = pick < 90 ? 512 : pick < 99 ? 16 * 1024 : 300 * 1024;
    return 1 + (size_t)(pcm_test_rand(rng) % max);
}

/* Allocate, check and free through a ring of RING objects, `rounds`
 * times or (rounds == 0) until stop_churn; false if an object changed. */
static bool churn(uint64_t seed, unsigned long rounds)
{
    struct object ring[RING];
    memset(ring, 0, sizeof ring);
    uint64_t rng = seed | 1;
    bool ok = true;
    for (unsigned long n = 0; rounds ? n < rounds : !__atomic_load_n(&stop_churn, __ATOMIC_RELAXED); n++) {
        struct object *o = &ring[pcm_test_rand(&rng) % RING];
        if (o->p) {
            ok = ok && object_intact(o);
            free(o->p);
        }
        if (!object_new(o, random_size(&rng), (unsigned char)n))
            o->p = NULL;
    }
    for (unsigned i = 0; i < RING; i++) {
        if (ring[i].p) {
            ok = ok && object_intact(&ring[i]);
            free(ring[i].p);
        }
    }
    return ok;
}

static void *churn_thread(void *arg)
{
    uint64_t seed = pcm_test_seed() ^ (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull;
    PCM_CHECK(churn(seed, 0), "parent thread %u: an object changed while the main thread forked",
              (unsigned)(uintptr_t)arg);
    return NULL;
}

/* The child's work; its exit status. */
static int child(unsigned n)
{
    alarm(WATCHDOG_CHILD); /* first: a deadlock below must not hang the test */
    for (unsigned k = 0; k < KEPT; k++) {
        if (!object_intact(&kept[k]))
            return CHILD_PARENT_OBJECT_CHANGED;
        if (k % 2 == n % 2)
            free(kept[k].p); /* the parent's object, in the child's copy */
    }
    if (pcm_preload_usable_of_100() != PCM_PRELOAD_CLASS_OF_100)
        return CHILD_NOT_PCMALLOC;
    if (!churn(pcm_test_seed() + n, 1000))
        return CHILD_OWN_OBJECT_CHANGED;
    if (n % 5 == 0) {
        /* The child forks too: pcmalloc's fork handlers left it able to. */
        pid_t grandchild = fork();
        if (grandchild == 0) {
            alarm(WATCHDOG_CHILD);
            for (unsigned k = 0; k < KEPT; k++)
                if (k % 2 != n % 2 && !object_intact(&kept[k]))
                    _exit(CHILD_PARENT_OBJECT_CHANGED);
            _exit(churn(pcm_test_seed() - n, 500) ? CHILD_OK : CHILD_OWN_OBJECT_CHANGED);
        }
        int status;
        if (grandchild < 0 || waitpid(grandchild, &status, 0) != grandchild || !WIFEXITED(status))
            return CHILD_GRANDCHILD_FAILED;
        if (WEXITSTATUS(status) != CHILD_OK)
            return WEXITSTATUS(status);
    }
    void *big = malloc(1 << 20);
    if (!big)
        return CHILD_OUT_OF_MEMORY;
    memset(big, 0x5a, 1 << 20);
    free(big);
    return CHILD_OK;
}

static void watchdog(int sig)
{
    static const char message[] = "  watchdog: the fork test is stuck (deadlock?)\n";
    (void)sig;
    ssize_t ignored = write(1, message, sizeof message - 1);
    (void)ignored;
    _exit(3);
}

static const char *child_failure(int status)
{
    switch (status) {
    case CHILD_PARENT_OBJECT_CHANGED: return "an object allocated before the fork changed";
    case CHILD_NOT_PCMALLOC: return "malloc is not pcmalloc's in the child";
    case CHILD_OWN_OBJECT_CHANGED: return "one of its own objects changed";
    case CHILD_GRANDCHILD_FAILED: return "its own child (forked from it) died";
    case CHILD_OUT_OF_MEMORY: return "malloc failed";
    default: return "unknown status";
    }
}

PCM_TEST(fork_while_threads_allocate)
{
    signal(SIGALRM, watchdog);
    alarm(WATCHDOG_PARENT);
    uint64_t rng = pcm_test_seed() | 1;
    for (unsigned k = 0; k < KEPT; k++)
        PCM_REQUIRE(object_new(&kept[k], k == 0 ? 400 * 1024 : random_size(&rng), (unsigned char)(k + 1)),
                    "malloc failed");

    __atomic_store_n(&stop_churn, 0, __ATOMIC_RELAXED);
    pthread_t threads[CHURN_THREADS];
    for (unsigned t = 0; t < CHURN_THREADS; t++)
        PCM_REQUIRE(pthread_create(&threads[t], NULL, churn_thread, (void *)(uintptr_t)t) == 0,
                    "pthread_create failed");

    unsigned ok = 0;
    for (unsigned n = 0; n < FORKS; n++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(child(n));
        PCM_CHECK(pid > 0, "fork %u failed", n);
        if (pid < 0)
            break;
        /* the parent allocates while the child runs */
        void *scratch[32];
        for (unsigned i = 0; i < 32; i++)
            scratch[i] = malloc(1 + (size_t)(pcm_test_rand(&rng) % 2048));
        for (unsigned i = 0; i < 32; i++)
            free(scratch[i]);
        int status;
        PCM_CHECK(waitpid(pid, &status, 0) == pid, "waitpid of child %u failed", n);
        if (WIFSIGNALED(status))
            PCM_CHECK(0, "child %u died of signal %d%s", n, WTERMSIG(status),
                      WTERMSIG(status) == SIGALRM ? " (its watchdog: stuck, a deadlock?)" : "");
        else if (WEXITSTATUS(status) != 0)
            PCM_CHECK(0, "child %u exited with status %d: %s", n, WEXITSTATUS(status),
                      child_failure(WEXITSTATUS(status)));
        else
            ok++;
    }

    __atomic_store_n(&stop_churn, 1, __ATOMIC_RELAXED);
    for (unsigned t = 0; t < CHURN_THREADS; t++)
        pthread_join(threads[t], NULL);
    for (unsigned k = 0; k < KEPT; k++) {
        PCM_CHECK(object_intact(&kept[k]), "the parent's object %u changed", k);
        free(kept[k].p);
    }
    alarm(0);
    pcm_test_printf("  %u forks with %u threads allocating: %u children exited 0\n", FORKS, CHURN_THREADS, ok);
}
