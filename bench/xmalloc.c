/*
 * bench/xmalloc.c - producer/consumer in the manner of xmalloc-test: one set
 * of threads only allocates, another only frees. Producers malloc batches of
 * objects of random size (the batch record itself is malloc'ed too) and
 * queue them; consumers take batches, check and free every object and the
 * batch. Every free is remote, and memory flows one way, from the
 * producers' heaps to the consumers'.
 *
 * With T threads, T/2 produce and the rest consume; with one thread it
 * produces a batch and consumes it itself. The queue is a small mutex-
 * guarded ring of batch pointers in static memory: one lock per batch of
 * objects, so the allocator's cost dominates.
 *
 *   xmalloc threads=T objects=N batch=B min=16 max=256
 * N objects in all, split over the producers; prints objects per second.
 */
#include "bench.h"

struct batch {
    long count;
    void *objects[];
};

enum { QUEUE_SLOTS = 64 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    struct batch *ring[QUEUE_SLOTS];
    unsigned head, count;
    int producers_left;
} queue = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
            { 0 }, 0, 0, 0 };

static long objects_total, batch_size, min_size, max_size;
static int thread_count, producer_count;
static uint64_t sums[256][8]; /* one cache line per thread */

static void enqueue(struct batch *b)
{
    pthread_mutex_lock(&queue.lock);
    while (queue.count == QUEUE_SLOTS)
        pthread_cond_wait(&queue.not_full, &queue.lock);
    queue.ring[(queue.head + queue.count++) % QUEUE_SLOTS] = b;
    pthread_cond_signal(&queue.not_empty);
    pthread_mutex_unlock(&queue.lock);
}

/* NULL once every producer has finished and the queue is empty. */
static struct batch *dequeue(void)
{
    pthread_mutex_lock(&queue.lock);
    while (queue.count == 0 && queue.producers_left > 0)
        pthread_cond_wait(&queue.not_empty, &queue.lock);
    struct batch *b = NULL;
    if (queue.count) {
        b = queue.ring[queue.head];
        queue.head = (queue.head + 1) % QUEUE_SLOTS;
        queue.count--;
        pthread_cond_signal(&queue.not_full);
    }
    pthread_mutex_unlock(&queue.lock);
    return b;
}

static uint64_t consume(struct batch *b)
{
    uint64_t sum = 0;
    for (long i = 0; i < b->count; i++) {
        sum += bench_verify(b->objects[i], (size_t)max_size);
        free(b->objects[i]);
    }
    free(b);
    return sum;
}

static struct batch *produce(bench_rng *rng, int index, uint64_t *sequence, long count)
{
    size_t record = sizeof(struct batch) + (size_t)count * sizeof(void *);
    struct batch *b = bench_check_alloc(malloc(record), record);
    b->count = count;
    for (long i = 0; i < count; i++) {
        size_t size = (size_t)bench_between(rng, (uint64_t)min_size, (uint64_t)max_size);
        b->objects[i] = bench_check_alloc(malloc(size), size);
        bench_stamp(b->objects[i], size, (uint64_t)index << 40 | (*sequence)++);
    }
    return b;
}

static void role(int index, void *unused)
{
    (void)unused;
    uint64_t sum = 0;
    if (index < producer_count) {
        bench_rng rng = bench_seed((uint64_t)index + 3000);
        uint64_t sequence = 0;
        long mine = objects_total / producer_count;
        for (long done = 0; done < mine; done += batch_size) {
            long count = mine - done < batch_size ? mine - done : batch_size;
            struct batch *b = produce(&rng, index, &sequence, count);
            if (thread_count == 1)
                sum += consume(b);
            else
                enqueue(b);
        }
        pthread_mutex_lock(&queue.lock);
        if (--queue.producers_left == 0)
            pthread_cond_broadcast(&queue.not_empty);
        pthread_mutex_unlock(&queue.lock);
    } else {
        for (struct batch *b; (b = dequeue()) != NULL;)
            sum += consume(b);
    }
    sums[index][0] = sum;
}

int main(int argc, char **argv)
{
    thread_count = (int)bench_arg(argc, argv, "threads", 4);
    objects_total = bench_arg(argc, argv, "objects", 10000000);
    batch_size = bench_arg(argc, argv, "batch", 100);
    min_size = bench_arg(argc, argv, "min", 16);
    max_size = bench_arg(argc, argv, "max", 256);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || objects_total < 1 || batch_size < 1 ||
        min_size < BENCH_STAMP_MIN || max_size < min_size)
        bench_fail("need 1 <= threads <= 256, positive objects and batch, 16 <= min <= max");
    producer_count = thread_count == 1 ? 1 : thread_count / 2;
    queue.producers_left = producer_count;

    double elapsed = bench_run_threads(thread_count, role, NULL);

    uint64_t checksum = 0;
    for (int i = 0; i < thread_count; i++)
        checksum += sums[i][0];
    double done = (double)(objects_total / producer_count) * producer_count;
    bench_report_throughput(done, elapsed, "objects/s", checksum);
    return 0;
}
