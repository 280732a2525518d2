/*
 * harness.h - pcmalloc's own test harness (no dependency).
 *
 * A test file declares tests with PCM_TEST(name) { ... } and checks with
 * PCM_CHECK(cond, "fmt", ...).  Tests are collected from a linker section,
 * so no constructors are needed: the same test files link into an ordinary
 * libc program and into the freestanding K6 program (no libc at all).
 * Hence: test code calls nothing from the C library.  It prints with
 * pcm_test_printf, gets shared memory with pcm_test_shared_alloc and
 * runs concurrent workers with pcm_test_run_workers (threads under libc,
 * forked processes sharing an anonymous mapping when freestanding).
 *
 * Output: one line per test, "ok   name" or "FAIL name", failing checks
 * above it with file:line, and last "N passed, N failed".
 */
#ifndef PCM_TEST_HARNESS_H
#define PCM_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pcm_test {
    const char *name;
    void (*run)(void);
};

#define PCM_TEST(name)                                                       \
    static void name(void);                                                  \
    static const struct pcm_test pcm_test_entry_##name                       \
        __attribute__((used, section("pcm_tests"), aligned(sizeof(void *)))) \
        = {#name, name};                                                     \
    static void name(void)

/* Record a failure (and keep going) when cond is false. */
#define PCM_CHECK(cond, ...)                                                 \
    do {                                                                     \
        if (!(cond))                                                         \
            pcm_test_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);           \
    } while (0)

/* The same, and leave the current function (usually the test). */
#define PCM_REQUIRE(cond, ...)                                               \
    do {                                                                     \
        if (!(cond)) {                                                       \
            pcm_test_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);           \
            return;                                                          \
        }                                                                    \
    } while (0)

void pcm_test_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* printf subset (src/format.c): %s %c %d %i %u %x %p, l ll z h hh lengths,
 * field widths with - and 0 flags, %% */
void pcm_test_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Number of worker threads a torture test should use: more than the
 * machine's cores, at least 8 (PCM_TEST_THREADS overrides). */
unsigned pcm_test_threads(void);

/* The environment variable `name` as a decimal number, or fallback when
 * it is unset or not one. */
unsigned long pcm_test_env_number(const char *name, unsigned long fallback);

/* Multiplier for iteration counts: 1 by default, PCM_TEST_SCALE overrides
 * (emulated runs may lower it; long soak runs raise it). Result >= 1. */
unsigned long pcm_test_scale(unsigned long base);

/* The seed of this run (PCM_TEST_SEED or derived from the clock); every
 * randomised test prints it on failure. */
uint64_t pcm_test_seed(void);

/* xorshift64*: a tiny PRNG; state must start non-zero. */
static inline uint64_t pcm_test_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* ---- Provided by the platform file (libc or freestanding) ---- */

void pcm_test_write(const char *buf, size_t len);
/* Zeroed memory that every worker sees at the same address. NULL on failure.
 * Workers share nothing else: forked ones get copies of all other memory. */
void *pcm_test_shared_alloc(size_t bytes);
void pcm_test_shared_free(void *p, size_t bytes);
/* Run fn(arg, i) for i in [0, n) concurrently and wait for all.  A worker's
 * failed checks count against the running test in either platform (forked
 * workers report theirs through the exit status).  Returns 0, or -1 when
 * the workers could not be started (also counted as a failure). */
int pcm_test_run_workers(unsigned n, void (*fn)(void *arg, unsigned index), void *arg);
unsigned pcm_test_cpu_count(void);
/* Give the CPU away (sched_yield): spin-waits in tests call it now and then,
 * so a waiter sharing a core with the worker it waits for lets it run. */
void pcm_test_yield(void);
/* Pin the calling thread to one CPU (sched_setaffinity); false if it
 * may not run there.  The first and the last CPU this process may run
 * on (-1 if it cannot tell).  libc platform only. */
bool pcm_test_pin(int cpu);
void pcm_test_allowed_cpus(int *first, int *last);
const char *pcm_test_getenv(const char *name);
uint64_t pcm_test_clock_ns(void);
void pcm_test_exit(int code) __attribute__((noreturn));

/* ---- libc platform only (death and fault tests) ---- */

/* How a child of pcm_test_run_child ended. */
struct pcm_test_child {
    bool ran;        /* forked and reaped */
    bool signaled;   /* killed by a signal ... */
    int signal;      /* ... this one */
    int exit_status; /* else its exit status (-1 if neither) */
    char text[2048]; /* the start of its stderr */
};

/* Run child(arg) in a forked process - no core dump, SIGALRM after
 * watchdog_s seconds (a hang fails too, instead of sticking the test),
 * stderr captured - and exit with its return value. */
struct pcm_test_child pcm_test_run_child(int (*child)(void *arg), void *arg, unsigned watchdog_s);

/* Up to size - 1 bytes of the file at path (a /proc or /sys file: read
 * until its end, with read(2), not stdio, whose buffers would come from
 * the allocator under test) into buf, NUL-terminated; how many, 0 if it
 * cannot be read. */
size_t pcm_test_read_file(const char *path, char *buf, size_t size);

/* The process's resident set (/proc/self/statm), bytes; 0 if unknown. */
size_t pcm_test_resident_bytes(void);

/* Sleeps ms milliseconds, on through interruptions (decay's delays). */
void pcm_test_sleep_ms(long ms);

/* The lower-case hex number at *p (as in /proc/self/maps); *p is left on
 * the first character after it. */
unsigned long pcm_test_parse_hex(const char **p);

/* Harness entry: runs every registered test (or those whose name contains
 * PCM_TEST_FILTER), prints the summary, returns the exit code. */
int pcm_test_main(void);

#endif
