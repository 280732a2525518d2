/*
 * bench/fragmentation.c - long-lived small objects interleaved with
 * short-lived ones, then most of them freed: how much of the freed memory
 * comes back.  A program that loads a data set (the keepers) while parsing
 * (the garbage around them) ends like this.
 *
 *   fragmentation objects=N keep=K min=A max=B rounds=R idle_ms=I
 *
 * One thread allocates N objects of A..B bytes (every byte written), one in
 * K of them at random long-lived, then frees all the others; R rounds, the
 * keepers of every round kept to the end.  After the last round's free it
 * reads the resident set (/proc/self/statm) and prints
 *
 *   measures: live_kb=L rss_after_free_kb=F rss_after_idle_kb=D
 *             rss_after_trim_kb=T pages_with_live_kb=P
 *             ratio_free=F/L ratio_idle=D/L ratio_trim=T/L
 *
 * F, D and T count from the resident set before the first allocation (the
 * program's own arrays are allocated and written before it).  D after I ms
 * of sleep and then a short burst of allocations and frees
 * (bench_idle_then_burst): an allocator that gives memory back after a
 * delay, from a background thread or from its next calls, has had its
 * chance (I = 0: D is not measured, printed as F).  T after
 * malloc_trim(0), which only glibc's and pcmalloc's export (under the
 * others it is glibc's, with nothing to do).  P is the bytes of the 4 KiB
 * pages that hold at least one byte of a keeper: what no allocator that
 * does not move objects can go below.  Then every keeper is checked and
 * freed.  The time is of the allocations and frees (not of the pause or
 * the measures); the checksum adds up every freed object's value.
 */
#include "bench.h"

#include <malloc.h>

static int by_address(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* An array of count entries, every byte written (not zeros: see main). */
static void *written_array(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        bench_fail("an array of %zu entries of %zu bytes is too large", count, size);
    void *array = bench_check_alloc(malloc(count * size), count * size);
    memset(array, 0xa5, count * size);
    return array;
}

/* Bytes of the distinct 4 KiB pages the objects cover (sorts `pages`). */
static long pages_with_live_kb(void **keepers, size_t *sizes, long count, uintptr_t *pages)
{
    long n = 0;
    for (long i = 0; i < count; i++) {
        uintptr_t first = (uintptr_t)keepers[i] >> 12, last = ((uintptr_t)keepers[i] + sizes[i] - 1) >> 12;
        for (uintptr_t p = first; p <= last; p++)
            pages[n++] = p;
    }
    qsort(pages, (size_t)n, sizeof *pages, by_address);
    long distinct = 0;
    for (long i = 0; i < n; i++)
        distinct += i == 0 || pages[i] != pages[i - 1];
    return distinct * 4;
}

int main(int argc, char **argv)
{
    long objects = bench_arg(argc, argv, "objects", 1000000);
    long keep = bench_arg(argc, argv, "keep", 10);
    long min = bench_arg(argc, argv, "min", 16);
    long max = bench_arg(argc, argv, "max", 512);
    long rounds = bench_arg(argc, argv, "rounds", 1);
    long idle_ms = bench_arg(argc, argv, "idle_ms", 0);
    bench_args_done(argc, argv);
    if (objects < 1 || keep < 1 || rounds < 1 || idle_ms < 0 || min < BENCH_STAMP_MIN || max < min)
        bench_fail("objects, keep and rounds must be positive, %d <= min <= max", BENCH_STAMP_MIN);

    /* Bookkeeping first, written, so that it is in the baseline.  Every
     * entry is set before it is read; the writes are of a non-zero byte,
     * which gcc cannot drop as it drops a memset of zeros after calloc
     * (and it turns malloc + memset of zeros into calloc): the 8 MB of
     * round_objects then became resident in the first round and counted
     * as the allocator's. */
    long most_kept = objects * rounds / keep + rounds; /* (a cap: the draw could exceed it) */
    long pages_each = max / 4096 + 2; /* the most 4 KiB pages one object touches */
    void **round_objects = written_array((size_t)objects, sizeof *round_objects);
    void **keepers = written_array((size_t)most_kept, sizeof *keepers);
    size_t *kept_sizes = written_array((size_t)most_kept, sizeof *kept_sizes);
    uintptr_t *pages = written_array((size_t)(most_kept * pages_each), sizeof *pages);
    long baseline_kb = bench_resident_kb();

    bench_rng rng = bench_seed(0xf4a9);
    uint64_t checksum = 0, id = 0;
    long kept = 0, live = 0;
    double begin = bench_now();
    for (long round = 0; round < rounds; round++) {
        for (long i = 0; i < objects; i++) {
            size_t size = (size_t)bench_between(&rng, (uint64_t)min, (uint64_t)max);
            char *p = bench_check_alloc(malloc(size), size);
            memset(p, (int)(id & 0xff), size);
            bench_stamp(p, size, id++);
            round_objects[i] = p;
            if (bench_below(&rng, (uint64_t)keep) == 0 && kept < most_kept) {
                keepers[kept] = p;
                kept_sizes[kept++] = size;
                live += (long)size;
                round_objects[i] = NULL;
            }
        }
        for (long i = 0; i < objects; i++) {
            if (round_objects[i]) {
                checksum += bench_verify(round_objects[i], (size_t)max);
                free(round_objects[i]);
            }
        }
    }
    double seconds = bench_now() - begin; /* the pause and the measures below are not timed */
    long after_free_kb, after_idle_kb;
    bench_rss_after_phase(baseline_kb, idle_ms, &after_free_kb, &after_idle_kb);
    malloc_trim(0);
    long after_trim_kb = bench_resident_kb() - baseline_kb;
    long live_kb = live / 1024 > 0 ? live / 1024 : 1;
    long floor_kb = pages_with_live_kb(keepers, kept_sizes, kept, pages);
    printf("measures: live_kb=%ld rss_after_free_kb=%ld rss_after_idle_kb=%ld rss_after_trim_kb=%ld "
           "pages_with_live_kb=%ld ratio_free=%.2f ratio_idle=%.2f ratio_trim=%.2f\n",
           live_kb, after_free_kb, after_idle_kb, after_trim_kb, floor_kb, (double)after_free_kb / (double)live_kb,
           (double)after_idle_kb / (double)live_kb, (double)after_trim_kb / (double)live_kb);
    begin = bench_now();
    for (long i = 0; i < kept; i++) {
        checksum += bench_verify(keepers[i], (size_t)max);
        free(keepers[i]);
    }
    bench_report_time(seconds + (bench_now() - begin), checksum);
    free(pages);
    free(kept_sizes);
    free(keepers);
    free(round_objects);
    return 0;
}
