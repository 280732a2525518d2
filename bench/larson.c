/*
 * bench/larson.c - a server simulation in the manner of Larson and Krishnan's
 * benchmark: each thread serves a table of live objects, replacing random
 * ones (free the old, malloc a new one of random size) as a server does
 * with its requests' buffers. Between rounds the tables are handed on:
 * in round r thread i serves table (i + r) mod T, so objects one thread
 * allocated are freed by another, round after round.
 *
 * Each table carries its own random stream and id counter, so the work done
 * on it does not depend on which thread does it: the checksum (a sum over
 * every object freed) is the same under every allocator and schedule.
 *
 *   larson threads=T slots=S rounds=R ops=N min=16 max=400
 * N replacements in all, split evenly over threads and rounds; prints
 * replacements (a free and a malloc each) per second. Filling the tables
 * at the start is timed too; the final cleanup is not. Also prints
 *   measures: fastest_round_ms=F median_round_ms=M slowest_round_ms=S
 * the wall time of its rounds: on some machines an allocator's runs fall
 * into a fast and a slow mode (bench/README.md), which these show.
 */
#include "bench.h"

struct slot {
    void *object;
};

struct table {
    _Alignas(64) bench_rng rng;
    uint64_t next_id;
    uint64_t checksum;
    struct slot *slots;
};

static struct table tables[256];
static pthread_barrier_t round_barrier;
/* Each round's seconds, read by thread 0 as the round's barrier lets it go. */
static double *round_seconds;
static long slot_count, round_count, ops_per_turn, min_size, max_size;
static int thread_count;

static void *make_object(struct table *t, int table_index)
{
    size_t size = (size_t)bench_between(&t->rng, (uint64_t)min_size, (uint64_t)max_size);
    void *p = bench_check_alloc(malloc(size), size);
    bench_stamp(p, size, (uint64_t)table_index << 40 | t->next_id++);
    return p;
}

static void serve(int index, void *unused)
{
    (void)unused;
    /* Each thread fills its own table first. */
    struct table *own = &tables[index];
    for (long s = 0; s < slot_count; s++)
        own->slots[s].object = make_object(own, index);
    pthread_barrier_wait(&round_barrier);
    double round_began = index == 0 ? bench_now() : 0;

    for (long round = 0; round < round_count; round++) {
        int table_index = (int)((index + round) % thread_count);
        struct table *t = &tables[table_index];
        for (long op = 0; op < ops_per_turn; op++) {
            struct slot *s = &t->slots[bench_below(&t->rng, (uint64_t)slot_count)];
            t->checksum += bench_verify(s->object, (size_t)max_size);
            free(s->object);
            s->object = make_object(t, table_index);
        }
        /* Hand the table on only when its current server is done with it. */
        pthread_barrier_wait(&round_barrier);
        if (index == 0) {
            double now = bench_now();
            round_seconds[round] = now - round_began;
            round_began = now;
        }
    }
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report_rounds(void)
{
    qsort(round_seconds, (size_t)round_count, sizeof *round_seconds, by_value);
    long mid = round_count / 2;
    double median = round_count % 2 ? round_seconds[mid] : (round_seconds[mid - 1] + round_seconds[mid]) / 2;
    printf("measures: fastest_round_ms=%.3f median_round_ms=%.3f slowest_round_ms=%.3f\n",
           round_seconds[0] * 1e3, median * 1e3, round_seconds[round_count - 1] * 1e3);
}

int main(int argc, char **argv)
{
    thread_count = (int)bench_arg(argc, argv, "threads", 4);
    slot_count = bench_arg(argc, argv, "slots", 1000);
    round_count = bench_arg(argc, argv, "rounds", 20);
    long ops = bench_arg(argc, argv, "ops", 25000000);
    min_size = bench_arg(argc, argv, "min", 16);
    max_size = bench_arg(argc, argv, "max", 400);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || slot_count < 1 || round_count < 1 || ops < 1 ||
        min_size < BENCH_STAMP_MIN || max_size < min_size)
        bench_fail("need 1 <= threads <= 256, positive slots, rounds and ops, 16 <= min <= max");
    ops_per_turn = ops / ((long)thread_count * round_count);
    if (ops_per_turn < 1)
        ops_per_turn = 1;

    for (int i = 0; i < thread_count; i++) {
        tables[i].rng = bench_seed((uint64_t)i + 2000);
        size_t size = (size_t)slot_count * sizeof(struct slot);
        tables[i].slots = bench_check_alloc(malloc(size), size);
    }
    pthread_barrier_init(&round_barrier, NULL, (unsigned)thread_count);
    size_t rounds_size = (size_t)round_count * sizeof *round_seconds;
    round_seconds = bench_check_alloc(malloc(rounds_size), rounds_size);

    double elapsed = bench_run_threads(thread_count, serve, NULL);

    uint64_t checksum = 0;
    for (int i = 0; i < thread_count; i++) {
        for (long s = 0; s < slot_count; s++) {
            checksum += bench_verify(tables[i].slots[s].object, (size_t)max_size);
            free(tables[i].slots[s].object);
        }
        checksum += tables[i].checksum;
        free(tables[i].slots);
    }
    report_rounds();
    free(round_seconds);
    double done = (double)ops_per_turn * (double)thread_count * (double)round_count;
    bench_report_throughput(done, elapsed, "ops/s", checksum);
    return 0;
}
