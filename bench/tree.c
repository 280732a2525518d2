/*
 * bench/tree.c - motivating workload 1: a single-threaded program linked
 * with -pthread (for binary compatibility only) that builds and destroys a
 * large tree of small objects of mixed sizes, as a document model does:
 * nodes, their names, child arrays grown by realloc, and text strings grown
 * by realloc a few bytes at a time.
 *
 * Before timing it starts and joins one idle thread, as the toolkits such
 * programs link do: from then on the C library knows the process is
 * multi-threaded and an allocator that locks pays for its locks on every
 * call, although no second thread ever allocates.
 *
 *   tree nodes=N rounds=R spawn=0|1 idle_ms=I
 * prints the time of R rounds of build, walk and destroy, and before it
 *
 *   measures: build_s=B walk_s=W destroy_s=D rss_after_free_kb=A
 *             rss_after_idle_kb=E
 *
 * the same time by phase, summed over the rounds: the build (every malloc
 * and realloc), the walk (no call to the allocator: it reads what the build
 * wrote) and the destroy (every free, mostly of names and texts that are no
 * longer in cache by then).  Phase times show where an allocator's time
 * goes: its own layout shows in the walk, and the cost of freeing objects
 * that are not in cache in the destroy.  A and E are the resident set
 * above the program's own (read before the first round) once the last
 * round's tree is freed: A at once, E after I ms of sleep and a short
 * burst of calls (bench_idle_then_burst; I = 0: E is not measured, printed
 * as A).  Neither is timed.
 */
#include "bench.h"

struct node {
    struct node **children; /* grown by realloc: capacity 2, 4, 8, ... */
    uint32_t child_count;
    uint32_t child_capacity;
    char *name;             /* 4..67 bytes, never resized */
    char *text;             /* NULL, or grown by realloc in appends */
    uint32_t name_length;
    uint32_t text_length;
    uint64_t value;
};

/* A node's parent is one of the last PARENT_WINDOW nodes made, so the tree
 * is deep and bushy at once, and building it stays cache-friendly: the
 * time goes to the allocator, not to cache misses on random parents. */
enum { PARENT_WINDOW = 1000 };

static void add_child(struct node *parent, struct node *child)
{
    if (parent->child_count == parent->child_capacity) {
        uint32_t capacity = parent->child_capacity ? parent->child_capacity * 2 : 2;
        size_t size = capacity * sizeof *parent->children;
        parent->children = bench_check_alloc(realloc(parent->children, size), size);
        parent->child_capacity = capacity;
    }
    parent->children[parent->child_count++] = child;
}

static struct node *make_node(bench_rng *rng, uint64_t index)
{
    struct node *n = bench_check_alloc(malloc(sizeof *n), sizeof *n);
    n->children = NULL;
    n->child_count = n->child_capacity = 0;
    n->value = index;
    n->name_length = (uint32_t)bench_between(rng, 4, 67);
    n->name = bench_check_alloc(malloc(n->name_length), n->name_length);
    memset(n->name, 'a' + (int)(index % 26), n->name_length);
    n->text = NULL;
    n->text_length = 0;
    /* One node in four has text, appended 1..8 times by realloc. */
    if (bench_below(rng, 4) == 0) {
        int appends = (int)bench_between(rng, 1, 8);
        for (int i = 0; i < appends; i++) {
            uint32_t add = (uint32_t)bench_between(rng, 8, 64);
            n->text = bench_check_alloc(realloc(n->text, n->text_length + add), n->text_length + add);
            memset(n->text + n->text_length, '0' + i, add);
            n->text_length += add;
        }
    }
    return n;
}

/* Recursion depth is about nodes / (PARENT_WINDOW / 2): a few thousand
 * frames at most for the sizes the runner uses. */
static uint64_t walk(const struct node *n)
{
    if (n->name[0] != 'a' + (int)(n->value % 26) || n->name[n->name_length - 1] != n->name[0])
        bench_fail("node %" PRIu64 ": name overwritten", n->value);
    if (n->text_length && n->text[0] != '0')
        bench_fail("node %" PRIu64 ": text overwritten", n->value);
    uint64_t sum = bench_mix(n->value + n->name_length * UINT64_C(1000003) + n->text_length);
    for (uint32_t i = 0; i < n->child_count; i++)
        sum += walk(n->children[i]);
    return sum;
}

static void destroy(struct node *n)
{
    for (uint32_t i = 0; i < n->child_count; i++)
        destroy(n->children[i]);
    free(n->children);
    free(n->name);
    free(n->text);
    free(n);
}

static void *idle_thread(void *unused)
{
    return unused;
}

int main(int argc, char **argv)
{
    long nodes = bench_arg(argc, argv, "nodes", 250000);
    long rounds = bench_arg(argc, argv, "rounds", 4);
    long spawn = bench_arg(argc, argv, "spawn", 1);
    long idle_ms = bench_arg(argc, argv, "idle_ms", 0);
    bench_args_done(argc, argv);
    if (nodes < 1 || rounds < 1 || idle_ms < 0)
        bench_fail("nodes and rounds must be positive, idle_ms not negative");

    if (spawn) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, idle_thread, NULL) != 0)
            bench_fail("pthread_create failed");
        pthread_join(thread, NULL);
    }

    uint64_t checksum = 0;
    struct bench_phases phases = {0};
    long baseline_kb = bench_resident_kb();
    double begin = bench_now();
    for (long round = 0; round < rounds; round++) {
        bench_phase_begin(&phases);
        bench_rng rng = bench_seed((uint64_t)round);
        size_t table_size = (size_t)nodes * sizeof(struct node *);
        struct node **made = bench_check_alloc(malloc(table_size), table_size);
        made[0] = make_node(&rng, 0);
        for (long i = 1; i < nodes; i++) {
            long window = i < PARENT_WINDOW ? i : PARENT_WINDOW;
            struct node *parent = made[i - 1 - (long)bench_below(&rng, (uint64_t)window)];
            made[i] = make_node(&rng, (uint64_t)i);
            add_child(parent, made[i]);
        }
        bench_phase_end(&phases, 0);
        checksum += walk(made[0]);
        bench_phase_end(&phases, 1);
        destroy(made[0]);
        free(made);
        bench_phase_end(&phases, 2);
    }
    double seconds = bench_now() - begin; /* the measures below are not timed */
    long after_free_kb, after_idle_kb;
    bench_rss_after_phase(baseline_kb, idle_ms, &after_free_kb, &after_idle_kb);
    printf("measures: build_s=%.4f walk_s=%.4f destroy_s=%.4f rss_after_free_kb=%ld rss_after_idle_kb=%ld\n",
           phases.spent[0], phases.spent[1], phases.spent[2], after_free_kb, after_idle_kb);
    bench_report_time(seconds, checksum);
    return 0;
}
