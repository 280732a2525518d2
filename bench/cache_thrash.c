/*
 * bench/cache_thrash.c - active false sharing, after Hoard's cache-thrash:
 * every thread repeatedly mallocs a small object, writes it many times and
 * frees it. An allocator that carves neighbouring small objects for
 * different threads out of one cache line makes the threads fight over it
 * although they share nothing.
 *
 *   cache_thrash threads=T objects=N writes=W size=8
 * N objects in all, split over the threads; prints objects per second.
 */
#include "bench.h"

static long objects_total, writes, object_size;
static int thread_count;
static uint64_t sums[256][8]; /* one cache line per thread: no false sharing of our own */

static void thrash(int index, void *unused)
{
    (void)unused;
    long mine = objects_total / thread_count;
    uint64_t sum = 0;
    for (long i = 0; i < mine; i++)
        sum += bench_write_object((size_t)object_size, writes);
    sums[index][0] = sum;
}

int main(int argc, char **argv)
{
    thread_count = (int)bench_arg(argc, argv, "threads", 4);
    objects_total = bench_arg(argc, argv, "objects", 150000);
    writes = bench_arg(argc, argv, "writes", 1000);
    object_size = bench_arg(argc, argv, "size", 8);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || objects_total < 1 || writes < 1 || object_size < 1)
        bench_fail("need 1 <= threads <= 256 and positive objects, writes and size");

    double elapsed = bench_run_threads(thread_count, thrash, NULL);

    uint64_t checksum = 0;
    for (int i = 0; i < thread_count; i++)
        checksum += sums[i][0];
    double done = (double)(objects_total / thread_count) * thread_count;
    bench_report_throughput(done, elapsed, "objects/s", checksum);
    return 0;
}
