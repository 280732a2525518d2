/*
 * tests/preload/thread_storm.c - thousands of short-lived threads, with
 * pcmalloc as the process's malloc (LD_PRELOAD; see preloaded.h).
 *
 * THREADS threads in all, at most AT_ONCE alive: the main thread starts a
 * new one each time it has joined the oldest.  Each thread allocates
 * objects (small ones, a realloc'd one that grows to a large object, now
 * and then a large one), checks and frees some, and leaves LEFT objects
 * for the main thread, which checks and frees them after the join - from
 * another thread, often another CPU: remote frees of objects whose
 * allocating thread is gone.  Thread start and exit themselves allocate
 * (the C library's thread descriptors, TLS, stacks' guard bookkeeping),
 * and pcmalloc keeps no per-thread state, so nothing may leak or break
 * however many threads come and go.  Some threads end with pthread_exit.
 */
#include "preloaded.h"

#include <pthread.h>

#define THREADS 2000u
#define AT_ONCE 64u
#define MADE 24u /* objects each thread allocates */
#define LEFT 8u  /* of which it leaves to the main thread */
#define STACK_BYTES ((size_t)256 * 1024)

struct object {
    unsigned char *p;
    size_t size;
    unsigned char value;
};

struct job {
    unsigned index;
    bool failed;
    struct object left[LEFT];
};

static bool object_intact(const struct object *o)
{
    for (size_t i = 0; i < o->size; i++)
        if (o->p[i] != o->value)
            return false;
    return true;
}

static void *storm_thread(void *arg)
{
    struct job *job = arg;
    uint64_t rng = (pcm_test_seed() ^ (job->index * 0x9E3779B97F4A7C15ull)) | 1;
    struct object made[MADE];
    for (unsigned i = 0; i < MADE; i++) {
        size_t size = 1 + (size_t)(pcm_test_rand(&rng) % 1024);
        if (i == 0 && job->index % 16 == 0)
            size = 300 * 1024; /* a large object now and then */
        made[i].size = size;
        made[i].value = (unsigned char)(job->index + i);
        made[i].p = malloc(size);
        if (!made[i].p) {
            job->failed = true;
            made[i].size = 0;
            continue;
        }
        memset(made[i].p, made[i].value, size);
    }
    /* One object grows by realloc from small to large. */
    unsigned char *grown = NULL;
    size_t grown_size = 0;
    for (size_t size = 16; size <= 320 * 1024; size *= 4) {
        unsigned char *p = realloc(grown, size);
        if (!p) {
            job->failed = true;
            break;
        }
        for (size_t i = 0; i < grown_size; i++)
            if (p[i] != (unsigned char)(i * 7))
                job->failed = true;
        for (size_t i = grown_size; i < size; i++)
            p[i] = (unsigned char)(i * 7);
        grown = p;
        grown_size = size;
    }
    free(grown);
    /* Free all but LEFT, leave those for the main thread. */
    for (unsigned i = LEFT; i < MADE; i++) {
        if (made[i].p && !object_intact(&made[i]))
            job->failed = true;
        free(made[i].p);
    }
    for (unsigned i = 0; i < LEFT; i++)
        job->left[i] = made[i];
    if (job->index % 3 == 0)
        pthread_exit(NULL);
    return NULL;
}

/* Join the thread of job, check and free what it left. */
static unsigned finish(pthread_t thread, struct job *job)
{
    unsigned freed = 0;
    PCM_CHECK(pthread_join(thread, NULL) == 0, "pthread_join of thread %u failed", job->index);
    PCM_CHECK(!job->failed, "thread %u: an allocation failed or an object changed", job->index);
    for (unsigned i = 0; i < LEFT; i++) {
        struct object *o = &job->left[i];
        if (!o->p)
            continue;
        PCM_CHECK(object_intact(o), "thread %u's object %u (%p, %zu bytes) changed after the thread exited",
                  job->index, i, (void *)o->p, o->size);
        free(o->p);
        freed++;
    }
    return freed;
}

PCM_TEST(thread_storm)
{
    static struct job jobs[AT_ONCE];
    static pthread_t threads[AT_ONCE];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_BYTES);
    unsigned started = 0, freed_by_main = 0;
    uint64_t start = pcm_test_clock_ns();
    for (unsigned n = 0; n < THREADS; n++) {
        unsigned slot = n % AT_ONCE;
        if (n >= AT_ONCE)
            freed_by_main += finish(threads[slot], &jobs[slot]);
        memset(&jobs[slot], 0, sizeof jobs[slot]);
        jobs[slot].index = n;
        int error = pthread_create(&threads[slot], &attr, storm_thread, &jobs[slot]);
        PCM_REQUIRE(error == 0, "pthread_create of thread %u failed (error %d)", n, error);
        started++;
    }
    for (unsigned n = started > AT_ONCE ? started - AT_ONCE : 0; n < started; n++)
        freed_by_main += finish(threads[n % AT_ONCE], &jobs[n % AT_ONCE]);
    pthread_attr_destroy(&attr);
    uint64_t ns = pcm_test_clock_ns() - start;
    pcm_test_printf("  %u threads, %u at once: %u objects freed by the main thread after their thread "
                    "exited, %lu.%02lu s\n",
                    started, AT_ONCE, freed_by_main, (unsigned long)(ns / 1000000000u),
                    (unsigned long)(ns / 10000000u % 100));
}
