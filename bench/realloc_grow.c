/*
 * bench/realloc_grow.c - motivating workload 2: a buffer grown by
 * realloc(p, size += 4096) from 4097 bytes, 350 steps a round, as a string
 * append or a decompressor's output buffer grows. Each step writes the new
 * bytes, as the real program would.
 *
 * With between=1 a small allocation is made after each step and kept until
 * the end of the round: it lands next to the buffer in many allocators and
 * stops growth in place, which is the case that exposes an O(n^2) copy.
 *
 *   realloc_grow rounds=R steps=350 start=4097 step=4096 between=0|1 small=32
 *                doublings=D
 * prints the time of R rounds; the data is checked at the end of each.
 * With D > 0 it then shows how the time grows with the steps: it runs
 * rounds of 2 * steps, 4 * steps, ... 2^D * steps (R / 2^(d + 1) rounds
 * for 2^d: half the bytes of the R rounds each time, after one untimed
 * round at that length), and prints
 *
 *   measures: us_350_steps=T us_700_steps=T2 ... x_700_vs_350=T2/T ...
 *
 * the microseconds a round at each length and the ratio of each doubling:
 * 2 if a round's time grows linearly with its steps (every byte written
 * and copied a bounded number of times), 4 if it grows with their square
 * (a copy of the whole buffer on every step).  The writes alone do not
 * quite double when the steps do, as a longer buffer outgrows a cache: on
 * a core with 2 MiB of L2, memset of the same bytes into a buffer allocated
 * once took 2.9-3.2, 2.5-2.6 and 1.9-2.1 times as long a round from 350 to
 * 700, 1400 and 2800 steps (bench/README.md).  The result's time is then
 * that of every timed round.
 */
#include "bench.h"

enum { MAX_DOUBLINGS = 4 };

static long start, step, between, small;
static char **kept;

/* `rounds` rounds of `steps` steps; returns their seconds and adds what
 * they built to *checksum. */
static double grow_rounds(long rounds, long steps, uint64_t *checksum)
{
    double begin = bench_now();
    for (long round = 0; round < rounds; round++) {
        size_t size = (size_t)start;
        unsigned char *buffer = bench_check_alloc(malloc(size), size);
        memset(buffer, 0xff, size);
        for (long s = 1; s <= steps; s++) {
            size_t grown = size + (size_t)step;
            buffer = bench_check_alloc(realloc(buffer, grown), grown);
            memset(buffer + size, (int)(s & 0xff), (size_t)step);
            size = grown;
            if (between) {
                kept[s - 1] = bench_check_alloc(malloc((size_t)small), (size_t)small);
                kept[s - 1][0] = (char)s;
            }
        }
        /* realloc must have carried every earlier step's bytes along. */
        if (buffer[0] != 0xff || buffer[start - 1] != 0xff)
            bench_fail("round %ld: the first %ld bytes were not preserved", round, start);
        for (long s = 1; s <= steps; s++) {
            size_t first = (size_t)start + (size_t)(s - 1) * (size_t)step;
            size_t last = first + (size_t)step - 1;
            if (buffer[first] != (s & 0xff) || buffer[last] != (s & 0xff))
                bench_fail("round %ld: bytes of step %ld were not preserved", round, s);
            *checksum += bench_mix((uint64_t)buffer[first] + first);
        }
        *checksum += size;
        free(buffer);
        if (between) {
            for (long s = 1; s <= steps; s++) {
                if (kept[s - 1][0] != (char)s)
                    bench_fail("round %ld: small object %ld overwritten", round, s);
                free(kept[s - 1]);
            }
        }
    }
    return bench_now() - begin;
}

int main(int argc, char **argv)
{
    long rounds = bench_arg(argc, argv, "rounds", 2000);
    long steps = bench_arg(argc, argv, "steps", 350);
    start = bench_arg(argc, argv, "start", 4097);
    step = bench_arg(argc, argv, "step", 4096);
    between = bench_arg(argc, argv, "between", 0);
    small = bench_arg(argc, argv, "small", 32);
    long doublings = bench_arg(argc, argv, "doublings", 0);
    bench_args_done(argc, argv);
    if (rounds < 1 || steps < 1 || start < 1 || step < 2 || small < 1)
        bench_fail("rounds, steps, start, step and small must be positive (step at least 2)");
    if (doublings < 0 || doublings > MAX_DOUBLINGS)
        bench_fail("doublings must be 0..%d", MAX_DOUBLINGS);

    size_t keep_size = ((size_t)steps << doublings) * sizeof(char *);
    kept = bench_check_alloc(malloc(keep_size), keep_size);
    uint64_t checksum = 0;
    double seconds = grow_rounds(rounds, steps, &checksum);
    double round_us[MAX_DOUBLINGS + 1] = { seconds * 1e6 / (double)rounds };
    for (long d = 1; d <= doublings; d++) {
        long fewer = rounds >> (d + 1) > 0 ? rounds >> (d + 1) : 1;
        grow_rounds(1, steps << d, &checksum); /* untimed: the first round at a new length
                                                  faults in the pages the longer buffer needs */
        double spent = grow_rounds(fewer, steps << d, &checksum);
        round_us[d] = spent * 1e6 / (double)fewer;
        seconds += spent;
    }
    if (doublings) {
        printf("measures:");
        for (long d = 0; d <= doublings; d++)
            printf(" us_%ld_steps=%.1f", steps << d, round_us[d]);
        for (long d = 1; d <= doublings; d++)
            printf(" x_%ld_vs_%ld=%.2f", steps << d, steps << (d - 1), round_us[d] / round_us[d - 1]);
        printf("\n");
    }
    bench_report_time(seconds, checksum);
    free(kept);
    return 0;
}
