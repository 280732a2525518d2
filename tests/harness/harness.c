/*
 * harness.c - test registry, runner and checks.
 * Calls nothing from the C library: it also runs in the freestanding K6
 * program.  Text is formatted by src/format.c (the allocator's own printf
 * subset, which is libc-free too), so every test build links src/format.c
 * and has src/ on its include path.  Output goes through pcm_test_write
 * (the platform file).
 */
#include "harness.h"
#include "harness_internal.h"

#include "format.h"

#include <stdarg.h>

extern const struct pcm_test __start_pcm_tests[];
extern const struct pcm_test __stop_pcm_tests[];

/* Failures of the running test, counted from any thread of this process. */
static unsigned pcm_test_failures;

unsigned pcm_test_failures_now(void)
{
    return __atomic_load_n(&pcm_test_failures, __ATOMIC_SEQ_CST);
}

/* ---- output ---- */

/*
 * Longest text one pcm_test_printf call or one failure report writes;
 * longer text is cut there.  Each call formats into a stack buffer with
 * src/format.c and leaves in a single pcm_test_write, so lines from
 * concurrent workers stay whole.
 */
#define PCM_TEST_LINE_MAX 1024
/* Room kept at the end of a failure report for " (seed N)\n", so a cut
 * message still ends with its seed and a newline. */
#define PCM_TEST_SEED_ROOM 32

void pcm_test_printf(const char *fmt, ...)
{
    char buf[PCM_TEST_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t len = pcm_format_v(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len)
        pcm_test_write(buf, len);
}

void pcm_test_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    __atomic_fetch_add(&pcm_test_failures, 1, __ATOMIC_SEQ_CST);
    char buf[PCM_TEST_LINE_MAX];
    size_t room = sizeof buf - PCM_TEST_SEED_ROOM;
    size_t len = pcm_format(buf, room, "  check failed at %s:%u: %s\n    ", file,
                            (unsigned)line, cond);
    va_list ap;
    va_start(ap, fmt);
    len += pcm_format_v(buf + len, room - len, fmt, ap);
    va_end(ap);
    len += pcm_format(buf + len, sizeof buf - len, " (seed %llu)\n",
                      (unsigned long long)pcm_test_seed());
    pcm_test_write(buf, len); /* one write per failure keeps concurrent lines whole */
}

/* ---- configuration from the environment ---- */

static unsigned long parse_unsigned(const char *s, unsigned long fallback)
{
    if (!s || !*s)
        return fallback;
    unsigned long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return fallback;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    return v;
}

unsigned long pcm_test_env_number(const char *name, unsigned long fallback)
{
    return parse_unsigned(pcm_test_getenv(name), fallback);
}

unsigned pcm_test_threads(void)
{
    unsigned long forced = parse_unsigned(pcm_test_getenv("PCM_TEST_THREADS"), 0);
    if (forced)
        return (unsigned)forced;
    unsigned n = 4 * pcm_test_cpu_count();
    return n < 8 ? 8 : n > 64 ? 64 : n;
}

unsigned long pcm_test_scale(unsigned long base)
{
    /* PCM_TEST_SCALE is a percentage: 100 = as written. */
    unsigned long percent = parse_unsigned(pcm_test_getenv("PCM_TEST_SCALE"), 100);
    unsigned long v = base / 100 * percent + base % 100 * percent / 100;
    return v ? v : 1;
}

static uint64_t seed_value;

uint64_t pcm_test_seed(void)
{
    if (!seed_value) {
        uint64_t s = parse_unsigned(pcm_test_getenv("PCM_TEST_SEED"), 0);
        if (!s)
            s = pcm_test_clock_ns() | 1;
        seed_value = s;
    }
    return seed_value;
}

/* ---- the runner ---- */

static bool contains(const char *hay, const char *needle)
{
    if (!needle || !*needle)
        return true;
    for (; *hay; hay++) {
        const char *h = hay, *n = needle;
        while (*h && *n && *h == *n) {
            h++;
            n++;
        }
        if (!*n)
            return true;
    }
    return false;
}

int pcm_test_main(void)
{
    const char *filter = pcm_test_getenv("PCM_TEST_FILTER");
    unsigned passed = 0, failed = 0;
    pcm_test_seed();
    for (const struct pcm_test *t = __start_pcm_tests; t < __stop_pcm_tests; t++) {
        if (!contains(t->name, filter))
            continue;
        __atomic_store_n(&pcm_test_failures, 0, __ATOMIC_SEQ_CST);
        uint64_t start = pcm_test_clock_ns();
        t->run();
        unsigned long ms = (unsigned long)((pcm_test_clock_ns() - start) / 1000000);
        if (pcm_test_failures_now()) {
            failed++;
            pcm_test_printf("FAIL %s (%lu ms)\n", t->name, ms);
        } else {
            passed++;
            pcm_test_printf("ok   %s (%lu ms)\n", t->name, ms);
        }
    }
    pcm_test_printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}

void pcm_test_fail_from_worker(unsigned count)
{
    __atomic_fetch_add(&pcm_test_failures, count, __ATOMIC_SEQ_CST);
}
