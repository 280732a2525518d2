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
 * prints the time of R rounds; the data is checked at the end of each.
 */
#include "bench.h"

int main(int argc, char **argv)
{
    long rounds = bench_arg(argc, argv, "rounds", 2000);
    long steps = bench_arg(argc, argv, "steps", 350);
    long start = bench_arg(argc, argv, "start", 4097);
    long step = bench_arg(argc, argv, "step", 4096);
    long between = bench_arg(argc, argv, "between", 0);
    long small = bench_arg(argc, argv, "small", 32);
    bench_args_done(argc, argv);
    if (rounds < 1 || steps < 1 || start < 1 || step < 2 || small < 1)
        bench_fail("rounds, steps, start, step and small must be positive (step at least 2)");

    size_t keep_size = (size_t)steps * sizeof(char *);
    char **kept = bench_check_alloc(malloc(keep_size), keep_size);
    uint64_t checksum = 0;
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
            checksum += bench_mix((uint64_t)buffer[first] + first);
        }
        checksum += size;
        free(buffer);
        if (between) {
            for (long s = 1; s <= steps; s++) {
                if (kept[s - 1][0] != (char)s)
                    bench_fail("round %ld: small object %ld overwritten", round, s);
                free(kept[s - 1]);
            }
        }
    }
    bench_report_time(bench_now() - begin, checksum);
    free(kept);
    return 0;
}
