/*
 * bench/bench.h - what every benchmark program shares: key=value arguments,
 * a deterministic random generator, checksums, object stamps, a clock,
 * the resident set, starting threads together, and the one result line the
 * runner parses.
 *
 * The programs are plain C11 linked with the C library only (one is C++17,
 * linked with the C++ runtime as well: so this header is C that C++
 * compiles too); the allocator under test comes in by LD_PRELOAD. So nothing here may allocate inside a
 * timed section on its own behalf: the allocator must see only the
 * workload's calls. Built with -D_GNU_SOURCE (program_invocation_short_name,
 * pthread barriers). A failed check prints why on stderr and exits with
 * status 3, which the runner reports as "corrupt".
 */
#ifndef BENCH_H
#define BENCH_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- failing loudly ---------------------------------------------------- */

/* The message, prefixed with the program's name, then exit(status). */
__attribute__((noreturn, format(printf, 2, 0)))
static inline void bench_vfail(int status, const char *format, va_list ap)
{
    fprintf(stderr, "%s: ", program_invocation_short_name);
    vfprintf(stderr, format, ap);
    fputc('\n', stderr);
    exit(status);
}

/* A check failed (exit 3, which the runner reports as corrupt). */
__attribute__((noreturn, format(printf, 1, 2)))
static inline void bench_fail(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    bench_vfail(3, format, ap);
}

/* Out of memory is a failure of the run, not something to benchmark past. */
static inline void *bench_check_alloc(void *p, size_t size)
{
    if (!p)
        bench_fail("allocation of %zu bytes returned NULL", size);
    return p;
}

/* ---- arguments: key=value, each key known to the program ---------------- */

/* Which argv entries some bench_arg call has consumed; bench_args_done
 * rejects the rest, so a misspelt key cannot silently use a default. */
static uint64_t bench_args_used;

/* The text after "key=" in argv (marked used), or NULL if no entry has
 * the key. */
static inline const char *bench_arg_text(int argc, char **argv, const char *key)
{
    size_t key_length = strlen(key);
    for (int i = 1; i < argc && i < 64; i++) {
        if (strncmp(argv[i], key, key_length) == 0 && argv[i][key_length] == '=') {
            bench_args_used |= UINT64_C(1) << i;
            return argv[i] + key_length + 1;
        }
    }
    return NULL;
}

static inline long bench_arg(int argc, char **argv, const char *key, long fallback)
{
    const char *text = bench_arg_text(argc, argv, key);
    if (!text)
        return fallback;
    char *end;
    long value = strtol(text, &end, 10);
    if (*end != '\0' || end == text)
        bench_fail("argument %s=%s: not an integer", key, text);
    return value;
}

static inline void bench_args_done(int argc, char **argv)
{
    if (argc >= 64)
        bench_fail("too many arguments");
    for (int i = 1; i < argc; i++)
        if (!(bench_args_used & (UINT64_C(1) << i)))
            bench_fail("unknown argument '%s'", argv[i]);
}

/* ---- random numbers and checksums -------------------------------------- */

/* SplitMix64: tiny, fast, and each stream is fixed by its seed, so a run's
 * sequence of sizes and operations is the same under every allocator. */
typedef struct {
    uint64_t state;
} bench_rng;

static inline uint64_t bench_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline bench_rng bench_seed(uint64_t seed)
{
    bench_rng r = { bench_mix(seed + UINT64_C(0x632be59bd9b4e019)) };
    return r;
}

static inline uint64_t bench_next(bench_rng *r)
{
    r->state += UINT64_C(0x9e3779b97f4a7c15);
    return bench_mix(r->state);
}

/* Uniform in [0, n); the modulo bias is irrelevant at these ranges. */
static inline uint64_t bench_below(bench_rng *r, uint64_t n)
{
    return n ? bench_next(r) % n : 0;
}

/* Uniform in [low, high]. */
static inline uint64_t bench_between(bench_rng *r, uint64_t low, uint64_t high)
{
    return low + bench_below(r, high - low + 1);
}

/* ---- object stamps ------------------------------------------------------ */

/* An object of at least 16 bytes carries its id (8 bytes) and its size (4
 * bytes) at the start and a byte derived from the id at its very end, which
 * lies past the header even at 16 bytes. If an allocator hands out
 * overlapping memory or loses a write, the check at free time sees it.
 * Threaded programs add up bench_object_value of every object they free:
 * the sum does not depend on the order of frees, so it is the same under
 * every allocator for the same arguments. */
enum { BENCH_STAMP_MIN = 16 };

static inline uint8_t bench_tail_byte(uint64_t id)
{
    return (uint8_t)(bench_mix(id) | 1);
}

static inline void bench_stamp(void *object, size_t size, uint64_t id)
{
    uint32_t size32 = (uint32_t)size;
    memcpy(object, &id, sizeof id);
    memcpy((char *)object + 8, &size32, sizeof size32);
    ((uint8_t *)object)[size - 1] = bench_tail_byte(id);
}

static inline uint64_t bench_stamp_id(const void *object)
{
    uint64_t id;
    memcpy(&id, object, sizeof id);
    return id;
}

static inline size_t bench_stamp_size(const void *object)
{
    uint32_t size32;
    memcpy(&size32, (const char *)object + 8, sizeof size32);
    return size32;
}

static inline uint64_t bench_object_value(uint64_t id, uint64_t size)
{
    return bench_mix(id * UINT64_C(0x100000001b3) + size);
}

/* Checks an object stamped by bench_stamp whose size is at most
 * max_size, and returns its value for the checksum. */
static inline uint64_t bench_verify(const void *object, size_t max_size)
{
    uint64_t id = bench_stamp_id(object);
    size_t size = bench_stamp_size(object);
    if (size < BENCH_STAMP_MIN || size > max_size)
        bench_fail("object %p: size field %zu is corrupt (id %" PRIu64 ")", object, size, id);
    if (((const uint8_t *)object)[size - 1] != bench_tail_byte(id))
        bench_fail("object %p (id %" PRIu64 ", %zu bytes): last byte overwritten",
                   object, id, size);
    return bench_object_value(id, size);
}

/* ---- time --------------------------------------------------------------- */

static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Time by phase, summed over rounds, for a program's measures: line (the
 * tree's and the list's build, walk and free). */
struct bench_phases {
    double began;    /* when the phase now running began */
    double spent[3]; /* seconds, by phase: build, walk, free */
};

static inline void bench_phase_begin(struct bench_phases *phases)
{
    phases->began = bench_now();
}

/* Phase `which` ends now, and the next begins. */
static inline void bench_phase_end(struct bench_phases *phases, int which)
{
    double now = bench_now();
    phases->spent[which] += now - phases->began;
    phases->began = now;
}

/* ---- resident set ------------------------------------------------------- */

/* The process's resident set in KiB (/proc/self/statm), 0 if unreadable. */
static inline long bench_resident_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* What a program does after a phase that freed its memory: idle_ms of
 * sleep, then a short burst of allocations and frees (256 bytes, 4096 at a
 * time, 8 times, all freed).  An allocator that gives memory back after a
 * delay, from a background thread or from its next calls, has had its
 * chance by the end. */
static inline void bench_idle_then_burst(long idle_ms)
{
    struct timespec pause = {idle_ms / 1000, idle_ms % 1000 * 1000000};
    nanosleep(&pause, NULL);
    static void *burst_objects[4096];
    for (int burst = 0; burst < 8; burst++) {
        for (int i = 0; i < 4096; i++)
            burst_objects[i] = bench_check_alloc(malloc(256), 256);
        for (int i = 0; i < 4096; i++)
            free(burst_objects[i]);
    }
}

/* The resident set above baseline_kb once a program freed what its phase
 * allocated: at once, and after bench_idle_then_burst(idle_ms) (idle_ms 0:
 * not measured, the first reading again).  Neither is timed. */
static inline void bench_rss_after_phase(long baseline_kb, long idle_ms, long *after_free_kb, long *after_idle_kb)
{
    *after_free_kb = *after_idle_kb = bench_resident_kb() - baseline_kb;
    if (idle_ms > 0) {
        bench_idle_then_burst(idle_ms);
        *after_idle_kb = bench_resident_kb() - baseline_kb;
    }
}

/* ---- threads ------------------------------------------------------------ */

/* Starts count threads running body(index, context), releases them together
 * and returns the seconds from the first thread's start to the last one's
 * end. The threads take the times themselves: on an oversubscribed machine
 * the main thread may not run again until most workers are done, so its
 * own clock would miss their work. Thread creation (stacks, the C
 * library's own allocations) stays outside the measured time. At most 256
 * threads. */
struct bench_thread_start {
    pthread_barrier_t *barrier;
    void (*body)(int index, void *context);
    void *context;
    int index;
    double began, ended;
};

static inline void *bench_thread_trampoline(void *argument)
{
    struct bench_thread_start *start = (struct bench_thread_start *)argument;
    pthread_barrier_wait(start->barrier);
    start->began = bench_now();
    start->body(start->index, start->context);
    start->ended = bench_now();
    return NULL;
}

static inline double bench_run_threads(int count, void (*body)(int index, void *context),
                                       void *context)
{
    static pthread_t threads[256];
    static struct bench_thread_start starts[256];
    pthread_barrier_t barrier;
    if (count < 1 || count > 256)
        bench_fail("thread count %d is out of range 1..256", count);
    pthread_barrier_init(&barrier, NULL, (unsigned)count + 1);
    for (int i = 0; i < count; i++) {
        starts[i] = (struct bench_thread_start){ &barrier, body, context, i, 0, 0 };
        if (pthread_create(&threads[i], NULL, bench_thread_trampoline, &starts[i]) != 0)
            bench_fail("pthread_create failed for thread %d of %d", i, count);
    }
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < count; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    double first = starts[0].began, last = starts[0].ended;
    for (int i = 1; i < count; i++) {
        if (starts[i].began < first)
            first = starts[i].began;
        if (starts[i].ended > last)
            last = starts[i].ended;
    }
    return last - first;
}

/* ---- the result line ------------------------------------------------------ */

/* The runner reads exactly this shape:
 *   result: <metric>=<number> <unit> checksum=<16 hex digits>
 * where metric is "time" (seconds, lower is better) or "throughput"
 * (higher is better). */
static inline void bench_report_time(double seconds, uint64_t checksum)
{
    printf("result: time=%.6f s checksum=%016" PRIx64 "\n", seconds, checksum);
    fflush(stdout);
}

static inline void bench_report_throughput(double operations, double seconds, const char *unit,
                                           uint64_t checksum)
{
    double rate = seconds > 0 ? operations / seconds : 0;
    printf("result: throughput=%.6g %s checksum=%016" PRIx64 "\n", rate, unit, checksum);
    fflush(stdout);
}

/* cache-scratch and cache-thrash's unit of work: allocate an object,
 * write every byte `writes` times, sum it, free it; returns the sum.
 * volatile: every write must reach the cache line, as a program updating a
 * small object in place does - that is where false sharing shows. */
static inline uint64_t bench_write_object(size_t size, long writes)
{
    volatile unsigned char *p = (volatile unsigned char *)bench_check_alloc(malloc(size), size);
    uint64_t sum = 0;
    for (size_t j = 0; j < size; j++)
        p[j] = 0;
    for (long w = 0; w < writes; w++)
        for (size_t j = 0; j < size; j++)
            p[j] = (unsigned char)(p[j] + 1);
    for (size_t j = 0; j < size; j++)
        sum += p[j];
    free((void *)p);
    return sum;
}

#endif
