/*
 * tests/soak/soak.c - the long run: mixed allocation workloads under thread
 * churn, for `make soak` (mk/soak.mk) to run with libpcmalloc.so preloaded.
 *
 *   soak [SECONDS]          default 600, or SOAK_SECONDS
 *   SOAK_THREADS=n          workers alive at once (default 2 x CPUs + 2)
 *   SOAK_SEED=n             the random seed (printed; thread interleaving
 *                           is not reproducible, the choices of each are)
 *   SOAK_ANY_MALLOC=1       run without pcmalloc too (to compare with glibc)
 *
 * Workers are created and joined continuously, each living for a random
 * number of operations.  Every block is filled with a pattern derived from
 * its own seed and checked whenever it changes hands, before it is freed and
 * around every realloc, so a block handed out twice, overwritten or moved
 * without its contents is caught.  Blocks travel between threads through a
 * table of mailboxes (an atomic exchange puts one in and takes out the one
 * that was there), so most frees are of blocks another thread - often one
 * that has exited since - allocated; the descriptor naming a block is a
 * small allocation of its own and travels the same way.  Sizes range from
 * 1 byte to 2 MiB (pcmalloc's large mappings above 256 KiB), with calloc,
 * posix_memalign and aligned_alloc among the calls; the main thread also
 * forks children that allocate and free inherited blocks, and calls
 * malloc_trim.  A watchdog fails the run when no operation completes for a
 * minute (a hang), and the first corruption ends it at once (a corrupted
 * heap cannot be trusted to report more).  Exit status 0 means no error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAILBOXES 2048
#define LOCAL_SLOTS 64
#define MAX_WORKERS 256
#define DESCRIPTOR_MAGIC 0x50434d534f414bULL /* "PCMSOAK" */

/* What a block is: the descriptor travels with it (and is itself a block
 * of 32 bytes from malloc, freed wherever the block is). */
struct block {
    uint64_t magic;
    unsigned char *p;
    size_t size;
    uint64_t seed;
};

static _Atomic(struct block *) mailbox[MAILBOXES];
static atomic_ulong operations;  /* progress, for the watchdog and the report */
static atomic_ulong bytes_allocated;
static atomic_ulong reallocs, cross_thread_handovers, large_blocks;
static atomic_bool stop;

/* ---- random numbers: xorshift64*, one state per thread ---- */

static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t below(uint64_t *state, uint64_t n)
{
    return next_random(state) % n;
}

/* ---- the pattern: 8 bytes at a time from (seed, word index), so that a
 * block shifted, truncated or swapped with another fails its check ---- */

static uint64_t pattern_word(uint64_t seed, size_t word)
{
    uint64_t x = seed ^ (word * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ULL;
}

static void fill(unsigned char *p, size_t size, uint64_t seed)
{
    size_t words = size / 8, i;
    for (i = 0; i < words; i++) {
        uint64_t w = pattern_word(seed, i);
        memcpy(p + 8 * i, &w, 8);
    }
    uint64_t last = pattern_word(seed, words);
    memcpy(p + 8 * words, &last, size % 8);
}

static void die(const char *what, const struct block *b, size_t offset)
{
    /* No stdio buffers, no malloc: the heap may be the thing that broke. */
    char line[256];
    int n = snprintf(line, sizeof line,
                     "soak: FAIL %s: block %p of %zu bytes (seed %" PRIx64 "), at offset %zu\n", what,
                     b ? (void *)b->p : NULL, b ? b->size : 0, b ? b->seed : 0, offset);
    if (write(2, line, (size_t)n) < 0) {
        /* nothing more to do */
    }
    _exit(3);
}

/* check LEN bytes of B against its pattern (LEN <= B->size). */
static void check_prefix(const struct block *b, size_t len)
{
    if (b->magic != DESCRIPTOR_MAGIC)
        die("descriptor overwritten", NULL, 0);
    size_t words = len / 8, i;
    for (i = 0; i < words; i++) {
        uint64_t got, want = pattern_word(b->seed, i);
        memcpy(&got, b->p + 8 * i, 8);
        if (got != want)
            die("contents changed", b, 8 * i);
    }
    uint64_t last = pattern_word(b->seed, words);
    if (memcmp(b->p + 8 * words, &last, len % 8) != 0)
        die("contents changed", b, 8 * words);
}

static void check(const struct block *b)
{
    check_prefix(b, b->size);
}

/* ---- sizes: mostly small, some medium, a few large ---- */

static size_t random_size(uint64_t *rng)
{
    uint64_t r = below(rng, 1000);
    if (r < 700)
        return 1 + below(rng, 256);
    if (r < 920)
        return 257 + below(rng, 32 * 1024);
    if (r < 990)
        return 32 * 1024 + below(rng, 224 * 1024);
    return 256 * 1024 + below(rng, 1792 * 1024);
}

static struct block *new_block(uint64_t *rng)
{
    struct block *b = malloc(sizeof *b);
    if (!b)
        die("malloc of a descriptor returned NULL", NULL, 0);
    b->magic = DESCRIPTOR_MAGIC;
    b->size = random_size(rng);
    b->seed = next_random(rng);
    uint64_t how = below(rng, 10);
    if (how == 0) {
        b->p = calloc(1, b->size);
        if (!b->p)
            die("calloc returned NULL", b, 0);
        for (size_t i = 0; i < b->size; i++)
            if (b->p[i] != 0)
                die("calloc memory not zero", b, i);
    } else if (how == 1) {
        size_t align = (size_t)16 << below(rng, 9); /* 16 .. 4096 */
        void *p = NULL;
        int rc = posix_memalign(&p, align, b->size);
        if (rc != 0 || !p || (uintptr_t)p % align != 0)
            die("posix_memalign failed or misaligned", b, align);
        b->p = p;
    } else if (how == 2) {
        size_t align = (size_t)64 << below(rng, 5); /* 64 .. 1024 */
        b->p = aligned_alloc(align, (b->size + align - 1) / align * align);
        if (!b->p || (uintptr_t)b->p % align != 0)
            die("aligned_alloc failed or misaligned", b, align);
    } else {
        b->p = malloc(b->size);
        if (!b->p)
            die("malloc returned NULL", b, 0);
    }
    if ((uintptr_t)b->p % 16 != 0)
        die("block not 16-byte aligned", b, 0);
    if (malloc_usable_size(b->p) < b->size)
        die("malloc_usable_size below the size asked for", b, malloc_usable_size(b->p));
    fill(b->p, b->size, b->seed);
    atomic_fetch_add_explicit(&bytes_allocated, b->size, memory_order_relaxed);
    if (b->size > 256 * 1024)
        atomic_fetch_add_explicit(&large_blocks, 1, memory_order_relaxed);
    return b;
}

static void free_block(struct block *b)
{
    check(b);
    free(b->p);
    b->magic = 0;
    free(b);
}

/* realloc to a new random size: the common prefix must survive. */
static void realloc_block(struct block *b, uint64_t *rng)
{
    check(b);
    size_t old = b->size;
    size_t size = below(rng, 4) == 0 ? old + 4096 : random_size(rng); /* growth steps too */
    unsigned char *p = realloc(b->p, size);
    if (!p)
        die("realloc returned NULL", b, size);
    b->p = p;
    b->size = size < old ? size : old;
    check_prefix(b, b->size);
    b->size = size;
    b->seed = next_random(rng);
    fill(b->p, b->size, b->seed);
    atomic_fetch_add_explicit(&reallocs, 1, memory_order_relaxed);
}

/* Put B into a random mailbox and return what was there (checked). */
static struct block *swap_mailbox(struct block *b, uint64_t *rng)
{
    struct block *got = atomic_exchange(&mailbox[below(rng, MAILBOXES)], b);
    if (got) {
        check(got);
        atomic_fetch_add_explicit(&cross_thread_handovers, 1, memory_order_relaxed);
    }
    return got;
}

/* ---- workers ---- */

struct worker {
    pthread_t thread;
    uint64_t seed;
    unsigned long budget;
    atomic_bool done;
    bool running;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = w->seed | 1;
    struct block *local[LOCAL_SLOTS] = {0};
    for (unsigned long op = 0; op < w->budget && !atomic_load_explicit(&stop, memory_order_relaxed); op++) {
        unsigned slot = (unsigned)below(&rng, LOCAL_SLOTS);
        struct block **b = &local[slot];
        uint64_t r = below(&rng, 100);
        if (r < 35 || !*b) {
            if (*b)
                free_block(*b);
            *b = new_block(&rng);
        } else if (r < 55) {
            free_block(*b);
            *b = NULL;
        } else if (r < 70) {
            realloc_block(*b, &rng);
        } else if (r < 95) {
            *b = swap_mailbox(*b, &rng);
        } else {
            check(*b);
        }
        atomic_fetch_add_explicit(&operations, 1, memory_order_relaxed);
    }
    /* Leave half behind for other threads to free; free the rest here. */
    for (unsigned i = 0; i < LOCAL_SLOTS; i++) {
        if (!local[i])
            continue;
        if (i % 2 == 0)
            local[i] = swap_mailbox(local[i], &rng);
        if (local[i])
            free_block(local[i]);
    }
    atomic_store(&w->done, true);
    return NULL;
}

static void start_worker(struct worker *w, uint64_t *rng)
{
    w->seed = next_random(rng);
    w->budget = 100 + below(rng, 8000); /* a few ms each: churn */
    atomic_store(&w->done, false);
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        fprintf(stderr, "soak: FAIL pthread_create: %s\n", strerror(rc));
        _exit(3);
    }
    w->running = true;
}

/* ---- the main thread's extras: fork, malloc_trim ---- */

/* A child of the multi-threaded process: takes some inherited blocks out of
 * the mailboxes (allocated by threads that do not exist in it), checks and
 * frees them, allocates its own, and exits 0 if all was well. */
static void fork_child(uint64_t seed)
{
    pid_t pid = fork();
    if (pid < 0) {
        perror("soak: fork");
        _exit(3);
    }
    if (pid == 0) {
        uint64_t rng = seed | 1;
        for (int i = 0; i < 200; i++) {
            struct block *b = atomic_exchange(&mailbox[below(&rng, MAILBOXES)], NULL);
            if (b)
                free_block(b);
        }
        struct block *mine[100];
        for (int i = 0; i < 100; i++)
            mine[i] = new_block(&rng);
        for (int i = 0; i < 100; i++)
            free_block(mine[i]);
        _exit(0);
    }
    /* A child stuck in malloc (a lock held across fork) is a failure. */
    for (int waited = 0;; waited++) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "soak: FAIL a forked child ended with status %#x\n", status);
                _exit(3);
            }
            return;
        }
        if (waited >= 3000) { /* 30 s */
            fprintf(stderr, "soak: FAIL a forked child hung for 30 s\n");
            kill(pid, SIGKILL);
            _exit(3);
        }
        usleep(10000);
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static unsigned long env_number(const char *name, unsigned long fallback)
{
    const char *s = getenv(name);
    return s && *s ? strtoul(s, NULL, 10) : fallback;
}

/* Does pcmalloc serve this process?  (pcm_malloc exists only in it, and
 * malloc must resolve into it.) */
static bool pcmalloc_serves(void)
{
    Dl_info info;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    return dlsym(RTLD_DEFAULT, "pcm_malloc") && m && dladdr(m, &info) && info.dli_fname
           && strstr(info.dli_fname, "libpcmalloc");
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : (double)env_number("SOAK_SECONDS", 600);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long threads = env_number("SOAK_THREADS", (unsigned long)(2 * (cpus > 0 ? cpus : 1) + 2));
    uint64_t seed = env_number("SOAK_SEED", (unsigned long)time(NULL));
    uint64_t rng = seed | 1;
    if (threads < 1 || threads > MAX_WORKERS) {
        fprintf(stderr, "soak: SOAK_THREADS must be 1..%d\n", MAX_WORKERS);
        return 2;
    }
    if (!pcmalloc_serves() && !env_number("SOAK_ANY_MALLOC", 0)) {
        fprintf(stderr, "soak: FAIL malloc is not pcmalloc's: run with LD_PRELOAD=libpcmalloc.so "
                        "(or SOAK_ANY_MALLOC=1)\n");
        return 1;
    }
    printf("soak: %.0f s, %lu workers at a time, seed %" PRIu64 ", malloc from %s\n", seconds, threads, seed,
           pcmalloc_serves() ? "pcmalloc" : "another allocator");
    fflush(stdout);

    static struct worker workers[MAX_WORKERS];
    unsigned long created = 0, forks = 0, trims = 0, last_ops = 0;
    double start = now(), last_progress = start, last_report = start, last_fork = start;
    while (now() - start < seconds) {
        for (unsigned long i = 0; i < threads; i++) {
            struct worker *w = &workers[i];
            if (w->running && atomic_load(&w->done)) {
                pthread_join(w->thread, NULL);
                w->running = false;
            }
            if (!w->running) {
                start_worker(w, &rng);
                created++;
            }
        }
        double t = now();
        if (t - last_fork >= 2.0) {
            fork_child(next_random(&rng));
            forks++;
            if (forks % 5 == 0) {
                malloc_trim(0);
                trims++;
            }
            last_fork = t;
        }
        unsigned long ops = atomic_load(&operations);
        if (ops != last_ops) {
            last_ops = ops;
            last_progress = t;
        } else if (t - last_progress > 60) {
            fprintf(stderr, "soak: FAIL no operation completed for 60 s (a hang?)\n");
            _exit(3);
        }
        if (t - last_report >= 10) {
            printf("soak: %4.0f s: %lu threads created, %lu operations, %lu KiB resident\n", t - start,
                   created, ops, rss_kib());
            fflush(stdout);
            last_report = t;
        }
        usleep(1000);
    }
    atomic_store(&stop, true);
    for (unsigned long i = 0; i < threads; i++)
        if (workers[i].running)
            pthread_join(workers[i].thread, NULL);
    unsigned long left = 0;
    for (unsigned i = 0; i < MAILBOXES; i++) {
        struct block *b = atomic_exchange(&mailbox[i], NULL);
        if (b) {
            free_block(b);
            left++;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long before_trim = rss_kib();
    malloc_trim(0); /* everything is free: what goes back to the OS? */
    printf("soak: done in %.0f s: %lu threads created and joined, %lu operations (%lu reallocs, "
           "%lu blocks handed between threads, %lu large), %lu MiB allocated, %lu forks, %lu malloc_trim, "
           "%lu blocks left in mailboxes freed; RSS: peak %ld MiB, all freed %ld MiB, after malloc_trim(0) %ld MiB; "
           "no error\n",
           now() - start, created, atomic_load(&operations), atomic_load(&reallocs),
           atomic_load(&cross_thread_handovers), atomic_load(&large_blocks), atomic_load(&bytes_allocated) >> 20,
           forks, trims, left, ru.ru_maxrss / 1024, before_trim / 1024, rss_kib() / 1024);
    return 0;
}
