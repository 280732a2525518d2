/*
 * bench/mixed_sizes.c - mixed sizes reaching the large range: each thread
 * keeps a table of live objects and replaces random ones, drawing sizes
 * from three bands: small (16 B..1 KiB, most draws), medium (1..64 KiB, 15
 * draws in a hundred by default) and large (64 KiB..4 MiB, one in a
 * hundred). Every object is written once per 4 KiB page, as a program uses
 * what it asks for, so an allocator that hands fresh mappings to every
 * large request pays the page faults, and one that hoards pays in peak
 * RSS.
 *
 *   mixed_sizes threads=T ops=N slots=S large_permille=10 medium_permille=150
 *               large_max=4194304
 * N replacements in all, split over the threads; prints replacements per
 * second. Filling the tables is timed; the final cleanup is not.
 */
#include "bench.h"

struct worker {
    _Alignas(64) uint64_t checksum;
    void **slots;
    size_t *sizes;
};

static struct worker workers[256];
static long ops_total, slot_count, large_permille, medium_permille, large_max;
static int thread_count;

static size_t draw_size(bench_rng *rng)
{
    uint64_t band = bench_below(rng, 1000);
    if (band < (uint64_t)large_permille)
        return (size_t)bench_between(rng, 65537, (uint64_t)large_max);
    if (band < (uint64_t)(large_permille + medium_permille))
        return (size_t)bench_between(rng, 1025, 65536);
    return (size_t)bench_between(rng, 16, 1024);
}

static void *make(size_t size, uint64_t id)
{
    unsigned char *p = bench_check_alloc(malloc(size), size);
    for (size_t offset = 4096; offset < size; offset += 4096)
        p[offset] = (unsigned char)offset;
    bench_stamp(p, size, id);
    return p;
}

static uint64_t check_and_free(void *object, size_t size)
{
    if (bench_stamp_size(object) != size)
        bench_fail("object %p (id %" PRIu64 "): size field %zu != %zu",
                   object, bench_stamp_id(object), bench_stamp_size(object), size);
    uint64_t value = bench_verify(object, size);
    free(object);
    return value;
}

static void replace(int index, void *unused)
{
    (void)unused;
    struct worker *w = &workers[index];
    bench_rng rng = bench_seed((uint64_t)index + 4000);
    uint64_t id = (uint64_t)index << 40;
    for (long s = 0; s < slot_count; s++) {
        w->sizes[s] = draw_size(&rng);
        w->slots[s] = make(w->sizes[s], id++);
    }
    for (long op = ops_total / thread_count; op > 0; op--) {
        long s = (long)bench_below(&rng, (uint64_t)slot_count);
        w->checksum += check_and_free(w->slots[s], w->sizes[s]);
        w->sizes[s] = draw_size(&rng);
        w->slots[s] = make(w->sizes[s], id++);
    }
}

int main(int argc, char **argv)
{
    thread_count = (int)bench_arg(argc, argv, "threads", 4);
    ops_total = bench_arg(argc, argv, "ops", 500000);
    slot_count = bench_arg(argc, argv, "slots", 200);
    large_permille = bench_arg(argc, argv, "large_permille", 10);
    medium_permille = bench_arg(argc, argv, "medium_permille", 150);
    large_max = bench_arg(argc, argv, "large_max", 4194304);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || ops_total < 1 || slot_count < 1 || large_permille < 0 ||
        medium_permille < 0 || large_permille + medium_permille > 1000 || large_max <= 65537)
        bench_fail("need 1 <= threads <= 256, positive ops and slots, large_permille and medium_permille "
                   "0 or more, 1000 at most together, large_max > 65537");

    for (int i = 0; i < thread_count; i++) {
        workers[i].slots = bench_check_alloc(calloc((size_t)slot_count, sizeof(void *)),
                                             (size_t)slot_count * sizeof(void *));
        workers[i].sizes = bench_check_alloc(calloc((size_t)slot_count, sizeof(size_t)),
                                             (size_t)slot_count * sizeof(size_t));
    }

    double elapsed = bench_run_threads(thread_count, replace, NULL);

    uint64_t checksum = 0;
    for (int i = 0; i < thread_count; i++) {
        for (long s = 0; s < slot_count; s++)
            checksum += check_and_free(workers[i].slots[s], workers[i].sizes[s]);
        checksum += workers[i].checksum;
        free(workers[i].slots);
        free(workers[i].sizes);
    }
    double done = (double)(ops_total / thread_count) * thread_count;
    bench_report_throughput(done, elapsed, "ops/s", checksum);
    return 0;
}
