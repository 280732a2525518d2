/*
 * bench/cache_scratch.c - passive false sharing, after Hoard's cache-scratch:
 * the main thread allocates one small object per thread, one after the
 * other, so they likely share a cache line, and hands object i to thread i.
 * Each thread frees it, then repeatedly mallocs an object of the same size,
 * writes it many times and frees it. An allocator that gives a thread back
 * the slot it just freed (on the main thread's cache line, beside its
 * siblings' objects) makes the threads fight over that line.
 *
 *   cache_scratch threads=T objects=N writes=W size=8
 * N objects in all, split over the threads; prints objects per second.
 */
#include "bench.h"

static void **handed;
static long objects_total, writes, object_size;
static int thread_count;
static uint64_t sums[256][8]; /* one cache line per thread: no false sharing of our own */

static void scratch(int index, void *unused)
{
    (void)unused;
    free(handed[index]);
    long mine = objects_total / thread_count;
    uint64_t sum = 0;
    for (long i = 0; i < mine; i++)
        sum += bench_write_object((size_t)object_size, writes);
    sums[index][0] = sum;
}

int main(int argc, char **argv)
{
    thread_count = (int)bench_arg(argc, argv, "threads", 4);
    objects_total = bench_arg(argc, argv, "objects", 100000);
    writes = bench_arg(argc, argv, "writes", 1000);
    object_size = bench_arg(argc, argv, "size", 8);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || objects_total < 1 || writes < 1 || object_size < 1)
        bench_fail("need 1 <= threads <= 256 and positive objects, writes and size");

    handed = bench_check_alloc(malloc((size_t)thread_count * sizeof *handed),
                               (size_t)thread_count * sizeof *handed);
    for (int i = 0; i < thread_count; i++)
        handed[i] = bench_check_alloc(malloc((size_t)object_size), (size_t)object_size);

    double elapsed = bench_run_threads(thread_count, scratch, NULL);

    uint64_t checksum = 0;
    for (int i = 0; i < thread_count; i++)
        checksum += sums[i][0];
    free(handed);
    double done = (double)(objects_total / thread_count) * thread_count;
    bench_report_throughput(done, elapsed, "objects/s", checksum);
    return 0;
}
