/*
 * bench/list.c - motivating workload 3: a singly linked list of 10 million
 * nodes, one malloc of 24 bytes per node, built, walked and freed. A pool
 * allocator does this with a handful of system calls; the small-object
 * path of a general allocator should cost no more than a pool's.
 *
 *   list nodes=N rounds=R idle_ms=I
 * prints the time of R rounds of build, walk and free, and before it
 *
 *   measures: build_s=B walk_s=W free_s=F rss_after_free_kb=A
 *             rss_after_idle_kb=D
 *
 * the same time by phase, summed over the rounds: the build (every malloc,
 * and the first write to each node's memory), the walk (no call to the
 * allocator: how its layout reads back) and the free.  A and D are the
 * resident set above the program's own (read before the first round) once
 * every node is freed: A at once, D after I ms of sleep and a short burst
 * of calls (bench_idle_then_burst; I = 0: D is not measured, printed as
 * A).  Neither is timed.
 */
#include "bench.h"

struct node {
    struct node *next;
    uint64_t index;
    uint64_t check;
};

_Static_assert(sizeof(struct node) == 24, "the workload is 24-byte nodes");

int main(int argc, char **argv)
{
    long nodes = bench_arg(argc, argv, "nodes", 10000000);
    long rounds = bench_arg(argc, argv, "rounds", 1);
    long idle_ms = bench_arg(argc, argv, "idle_ms", 0);
    bench_args_done(argc, argv);
    if (nodes < 1 || rounds < 1 || idle_ms < 0)
        bench_fail("nodes and rounds must be positive, idle_ms not negative");

    uint64_t checksum = 0;
    struct bench_phases phases = {0};
    long baseline_kb = bench_resident_kb();
    double begin = bench_now();
    for (long round = 0; round < rounds; round++) {
        bench_phase_begin(&phases);
        /* Appending at the tail keeps list order = allocation order, the
         * order a pool would lay the nodes out in. */
        struct node *head = NULL, **tail = &head;
        for (long i = 0; i < nodes; i++) {
            struct node *n = bench_check_alloc(malloc(sizeof *n), sizeof *n);
            n->next = NULL;
            n->index = (uint64_t)i;
            n->check = bench_mix((uint64_t)i);
            *tail = n;
            tail = &n->next;
        }
        bench_phase_end(&phases, 0);
        long seen = 0;
        for (struct node *n = head; n; n = n->next, seen++) {
            if (n->index != (uint64_t)seen || n->check != bench_mix(n->index))
                bench_fail("round %ld: node %ld overwritten", round, seen);
            checksum += n->check;
        }
        if (seen != nodes)
            bench_fail("round %ld: walked %ld nodes of %ld", round, seen, nodes);
        bench_phase_end(&phases, 1);
        while (head) {
            struct node *next = head->next;
            free(head);
            head = next;
        }
        bench_phase_end(&phases, 2);
    }
    double seconds = bench_now() - begin; /* the measures below are not timed */
    long after_free_kb, after_idle_kb;
    bench_rss_after_phase(baseline_kb, idle_ms, &after_free_kb, &after_idle_kb);
    printf("measures: build_s=%.4f walk_s=%.4f free_s=%.4f rss_after_free_kb=%ld rss_after_idle_kb=%ld\n",
           phases.spent[0], phases.spent[1], phases.spent[2], after_free_kb, after_idle_kb);
    bench_report_time(seconds, checksum);
    return 0;
}
