/*
 * tests/unit/os_linux_vdso.c - the decay's clock read through the vDSO
 * (src/os_linux_vdso.c).
 *
 * Natively the kernel maps a vDSO (the i386 suite's too, on x86_64's
 * 32-bit one): the lookup must find its clock, and the clock must agree
 * with libc's.  Under qemu-user there is none: the same tests then check
 * the system call it falls back to.
 */
#include "harness.h"

#include "os.h"

#include <stdint.h>
#include <sys/auxv.h>
#include <time.h>

/* libc's reading of a clock, in nanoseconds. */
static uint64_t libc_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same in milliseconds, as pcm_os_monotonic_ms computes them. */
static unsigned long libc_coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (unsigned long)ts.tv_sec * 1000u + (unsigned long)(ts.tv_nsec / 1000000);
}

static bool kernel_maps_a_vdso(void)
{
    return getauxval(AT_SYSINFO_EHDR) != 0;
}

PCM_TEST(vdso_clock_found_exactly_where_the_kernel_maps_a_vdso)
{
    bool mapped = kernel_maps_a_vdso();
    PCM_CHECK(pcm_os_vdso_clock_found() == mapped, "vDSO %s, its clock %s", mapped ? "mapped" : "not mapped",
              pcm_os_vdso_clock_found() ? "found" : "not found");
    if (!mapped)
        pcm_test_printf("  (no vDSO here, as under qemu-user: the clock is the system call)\n");
}

PCM_TEST(vdso_lookup_of_a_name_it_does_not_export_is_null)
{
    PCM_CHECK(pcm_os_vdso_symbol("pcm_no_such_function") == NULL, "found a function the vDSO lacks");
    PCM_CHECK(pcm_os_vdso_symbol("") == NULL, "the empty name matched a symbol");
    /* a prefix of an exported name is not that name */
    PCM_CHECK(pcm_os_vdso_symbol("__vdso_clock") == NULL, "a prefix matched");
}

/* The function found is the kernel's clock: called with CLOCK_MONOTONIC
 * it reads between two readings of libc's. */
PCM_TEST(vdso_clock_found_reads_the_kernels_monotonic_clock)
{
    if (!pcm_os_vdso_clock_found())
        return;
#if defined(__aarch64__)
    const char *name = "__kernel_clock_gettime";
#else
    const char *name = "__vdso_clock_gettime";
#endif
    int (*clock)(clockid_t, long *) = (int (*)(clockid_t, long *))pcm_os_vdso_symbol(name);
    PCM_REQUIRE(clock != NULL, "%s not found", name);
    for (int round = 0; round < 100; round++) {
        long ts[2] = {-1, -1}; /* two longs: the kernel's timespec on each arch built here */
        uint64_t before = libc_ns(CLOCK_MONOTONIC);
        int rc = clock(CLOCK_MONOTONIC, ts);
        uint64_t after = libc_ns(CLOCK_MONOTONIC);
        uint64_t read = (uint64_t)ts[0] * 1000000000u + (uint64_t)ts[1];
        PCM_REQUIRE(rc == 0 && ts[1] >= 0 && ts[1] < 1000000000, "round %d: rc %d, %ld s %ld ns", round, rc, ts[0],
                    ts[1]);
        PCM_REQUIRE(before <= read && read <= after, "round %d: %llu ns not within %llu..%llu", round,
                    (unsigned long long)read, (unsigned long long)before, (unsigned long long)after);
    }
}

/* Same clock, same rounding: a reading lies between two of libc's. */
PCM_TEST(monotonic_ms_lies_between_two_readings_of_libcs_clock)
{
    for (int round = 0; round < 1000; round++) {
        unsigned long before = libc_coarse_ms();
        unsigned long now = pcm_os_monotonic_ms();
        unsigned long after = libc_coarse_ms();
        PCM_REQUIRE(before <= now && now <= after, "round %d: %lu ms not within %lu..%lu", round, now, before,
                    after);
    }
}

/* The nanosecond clock (the caches' growth) reads CLOCK_MONOTONIC mod
 * 2^32: between two readings of libc's, by unsigned difference. */
PCM_TEST(monotonic_ns32_lies_between_two_readings_of_libcs_clock)
{
    for (int round = 0; round < 1000; round++) {
        uint32_t before = (uint32_t)libc_ns(CLOCK_MONOTONIC);
        uint32_t now = pcm_os_monotonic_ns32();
        uint32_t after = (uint32_t)libc_ns(CLOCK_MONOTONIC);
        PCM_REQUIRE((uint32_t)(now - before) <= (uint32_t)(after - before), "round %d: %u ns not within %u..%u",
                    round, now, before, after);
    }
}

PCM_TEST(monotonic_ms_advances_over_a_sleep)
{
    unsigned long start = pcm_os_monotonic_ms();
    struct timespec nap = {0, 50 * 1000000};
    while (nanosleep(&nap, &nap) != 0)
        ;
    unsigned long slept = pcm_os_monotonic_ms() - start;
    /* the coarse clock steps once a tick (1 to 10 ms); a loaded machine
     * may oversleep a lot, never undersleep */
    PCM_CHECK(slept >= 40 && slept < 10000, "50 ms of sleep read as %lu ms", slept);
}
