/*
 * bench/threadtest.c - after Hoard's threadtest: each thread, on its own,
 * allocates a batch of objects of one size, writes each, then frees the
 * whole batch, again and again. Nothing is shared, so an allocator should
 * scale with the cores and lose nothing when threads outnumber them.
 *
 *   threadtest threads=T objects=N batch=B size=64
 * N objects in all, split over the threads; prints objects per second.
 */
#include "bench.h"

static long objects_total, batch_size, object_size;
static int thread_count;
static uint64_t sums[256][8]; /* one cache line per thread */

static void batches(int index, void *unused)
{
    (void)unused;
    /* The pointer array is the thread's own and outlives the batches. */
    size_t table = (size_t)batch_size * sizeof(char *);
    char **batch = bench_check_alloc(malloc(table), table);
    long rounds = objects_total / thread_count / batch_size;
    uint64_t sum = 0;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < batch_size; i++) {
            batch[i] = bench_check_alloc(malloc((size_t)object_size), (size_t)object_size);
            batch[i][0] = (char)i;
            batch[i][object_size - 1] = (char)r;
        }
        for (long i = 0; i < batch_size; i++) {
            if (batch[i][0] != (char)i || batch[i][object_size - 1] != (char)r)
                bench_fail("thread %d, batch %ld: object %ld overwritten", index, r, i);
            sum += (unsigned char)batch[i][0];
            free(batch[i]);
        }
    }
    free(batch);
    sums[index][0] = sum;
}

int main(int argc, char **argv)
{
    thread_count = (int)bench_arg(argc, argv, "threads", 4);
    objects_total = bench_arg(argc, argv, "objects", 50000000);
    batch_size = bench_arg(argc, argv, "batch", 1000);
    object_size = bench_arg(argc, argv, "size", 64);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || objects_total < 1 || batch_size < 1 ||
        object_size < 1)
        bench_fail("need 1 <= threads <= 256 and positive objects, batch and size");

    double elapsed = bench_run_threads(thread_count, batches, NULL);

    uint64_t checksum = 0;
    for (int i = 0; i < thread_count; i++)
        checksum += sums[i][0];
    double done = (double)(objects_total / thread_count / batch_size) * batch_size * thread_count;
    bench_report_throughput(done, elapsed, "objects/s", checksum);
    return 0;
}
