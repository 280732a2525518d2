/*
 * bench/fastpath.c - the fast-path microbenchmark: malloc and free of one
 * small object, back to back, many times. The runner runs it under
 * valgrind --tool=callgrind --toggle-collect=measured_pairs and divides the
 * instructions counted inside measured_pairs by the number of pairs: a
 * count that, unlike a time, repeats exactly on a noisy machine.
 *
 * A warm-up of the same pattern runs first (outside measured_pairs), so
 * the count is the steady state: caches filled, size classes initialised.
 * With baseline=1 the loop calls two empty functions instead, which gives
 * the loop's own cost per pair for the runner to subtract.
 *
 *   fastpath size=S pairs=N warmup=W baseline=0|1
 * size=0 cycles through 16, 32, ..., 512 bytes in a fixed shuffled order.
 * It also prints "malloc-from: <shared object>", the object whose malloc
 * the program's calls reach, so the runner can check that the preload
 * took effect under valgrind.
 */
#include <dlfcn.h>

#include "bench.h"

enum { SIZE_TABLE = 1024 };

/* Opaque to the compiler, so it can neither drop a malloc/free pair it
 * sees is unused nor fold the baseline calls away. */
static inline void keep(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static void *empty_alloc(size_t size)
{
    static char box[16];
    keep(&size);
    return box;
}

__attribute__((noinline)) static void empty_free(void *p)
{
    keep(p);
}

__attribute__((noinline)) void measured_pairs(const size_t *sizes, long pairs, int baseline)
{
    if (baseline) {
        for (long i = 0; i < pairs; i++) {
            void *p = empty_alloc(sizes[i & (SIZE_TABLE - 1)]);
            keep(p);
            empty_free(p);
        }
    } else {
        for (long i = 0; i < pairs; i++) {
            void *p = malloc(sizes[i & (SIZE_TABLE - 1)]);
            keep(p);
            free(p);
        }
    }
}

__attribute__((noinline)) static void warm_up(const size_t *sizes, long pairs)
{
    for (long i = 0; i < pairs; i++) {
        void *p = malloc(sizes[i & (SIZE_TABLE - 1)]);
        keep(p);
        free(p);
    }
}

int main(int argc, char **argv)
{
    long size = bench_arg(argc, argv, "size", 0);
    long pairs = bench_arg(argc, argv, "pairs", 200000);
    long warmup = bench_arg(argc, argv, "warmup", 20000);
    long baseline = bench_arg(argc, argv, "baseline", 0);
    bench_args_done(argc, argv);
    if (size < 0 || pairs < 1 || warmup < 0)
        bench_fail("need size >= 0, pairs >= 1, warmup >= 0");

    static size_t sizes[SIZE_TABLE];
    bench_rng rng = bench_seed(5000);
    for (int i = 0; i < SIZE_TABLE; i++)
        sizes[i] = size ? (size_t)size : 16 * (size_t)bench_between(&rng, 1, 32);

    warm_up(sizes, warmup);
    double begin = bench_now();
    measured_pairs(sizes, pairs, (int)baseline);
    double elapsed = bench_now() - begin;
    /* The checksum identifies the size sequence, which must not depend on
     * the allocator; the time is only for a look without valgrind. */
    uint64_t checksum = 0;
    for (int i = 0; i < SIZE_TABLE; i++)
        checksum = bench_mix(checksum + sizes[i]);
    Dl_info where;
    void *(*volatile reached)(size_t) = malloc;
    if (dladdr((void *)reached, &where) && where.dli_fname)
        printf("malloc-from: %s\n", where.dli_fname);
    bench_report_throughput((double)pairs, elapsed, "pairs/s", checksum);
    return 0;
}
