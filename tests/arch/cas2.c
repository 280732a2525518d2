/*
 * cas2.c - double-width compare-and-swap of a (pointer, tag) pair: both
 * halves compared and written, the pair seen returned on failure, and a
 * tagged Treiber stack from more workers than cores that must neither lose
 * nor duplicate a node over millions of pops and pushes.
 */
#include "arch_test.h"

PCM_TEST(cas2_semantics)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        volatile pcm_pair_t pair;
        pair.half.ptr = 0x1000;
        pair.half.tag = 7;
        pcm_pair_t expected = pcm_pair_make(0x1000, 7);
        PCM_CHECK(pcm_cas2_acq_rel(&pair, &expected, pcm_pair_make(0x2000, 8)), "%s: matching cas2 failed",
                  variant);
        PCM_CHECK(pair.half.ptr == 0x2000 && pair.half.tag == 8, "%s: wrote (%lx, %lu)", variant,
                  (unsigned long)pair.half.ptr, (unsigned long)pair.half.tag);

        /* right pointer, stale tag: the ABA case the tag exists for */
        expected = pcm_pair_make(0x2000, 7);
        PCM_CHECK(!pcm_cas2_acq_rel(&pair, &expected, pcm_pair_make(0x3000, 9)), "%s: stale tag accepted",
                  variant);
        PCM_CHECK(expected.half.ptr == 0x2000 && expected.half.tag == 8, "%s: saw (%lx, %lu)", variant,
                  (unsigned long)expected.half.ptr, (unsigned long)expected.half.tag);
        /* stale pointer, right tag */
        expected = pcm_pair_make(0x1000, 8);
        PCM_CHECK(!pcm_cas2_acq_rel(&pair, &expected, pcm_pair_make(0x3000, 9)), "%s: stale ptr accepted",
                  variant);
        PCM_CHECK(pair.half.ptr == 0x2000 && pair.half.tag == 8, "%s: failed cas2 wrote", variant);
        PCM_CHECK(expected.half.ptr == 0x2000 && expected.half.tag == 8, "%s: failure did not report pair",
                  variant);

        /* every bit of both halves, including the top ones */
        pcm_word_t ones = (pcm_word_t)-1;
        PCM_CHECK(pcm_cas2_acq_rel(&pair, &expected, pcm_pair_make(ones, ones)), "%s: all-ones", variant);
        expected = pcm_pair_make(ones, ones >> 1);
        PCM_CHECK(!pcm_cas2_acq_rel(&pair, &expected, pcm_pair_make(0, 0)), "%s: tag top bit ignored",
                  variant);
        PCM_CHECK(expected.half.tag == ones, "%s: tag seen %lx", variant, (unsigned long)expected.half.tag);
        expected = pcm_pair_make(ones >> 1, ones);
        PCM_CHECK(!pcm_cas2_acq_rel(&pair, &expected, pcm_pair_make(0, 0)), "%s: ptr top bit ignored",
                  variant);
    }
}

/* ---- tagged Treiber stack ---- */

struct node {
    volatile pcm_word_t next;
    volatile pcm_word_t holder;   /* 0 on the stack, worker + 1 while popped */
    volatile pcm_word_t payload;  /* written by the holder, checked before push */
    pcm_word_t pad;
};

struct treiber {
    volatile pcm_pair_t head;     /* (top node, changes so far) */
    volatile pcm_word_t duplicates;
    volatile pcm_word_t corrupted;
    volatile pcm_word_t pops;
    unsigned long per_worker;
    unsigned nodes;
    struct node *node;
    uint64_t seed;
};

/* Pop: the tag makes a stale head fail even if the same node is back on
 * top (ABA), so the `next` read from it is never installed once stale.
 * The read itself may see a node another worker holds: the memory stays
 * valid (the nodes are never unmapped), only its value is discarded. */
static struct node *treiber_pop(struct treiber *t)
{
    pcm_pair_t seen = pcm_pair_load_torn(&t->head);
    for (;;) {
        struct node *top = (struct node *)seen.half.ptr;
        if (!top)
            return NULL;
        pcm_word_t next = pcm_load_relaxed(&top->next);
        if (pcm_cas2_acq_rel(&t->head, &seen, pcm_pair_make(next, seen.half.tag + 1)))
            return top;
    }
}

static void treiber_push(struct treiber *t, struct node *n)
{
    pcm_pair_t seen = pcm_pair_load_torn(&t->head);
    do
        pcm_store_relaxed(&n->next, seen.half.ptr);
    while (!pcm_cas2_acq_rel(&t->head, &seen, pcm_pair_make((pcm_word_t)n, seen.half.tag + 1)));
}

static void treiber_worker(void *arg, unsigned index)
{
    struct treiber *t = arg;
    uint64_t rng = t->seed + index * 0x9E3779B97F4A7C15ULL;
    struct node *held[4];
    pcm_word_t me = index + 1;
    unsigned long pops = 0;
    for (unsigned long i = 0; i < t->per_worker; i++) {
        unsigned want = 1 + (unsigned)(pcm_test_rand(&rng) % 4), got = 0;
        while (got < want) {
            struct node *n = treiber_pop(t);
            if (!n)
                break;
            if (pcm_swap_acq_rel(&n->holder, me) != 0)
                pcm_fetch_add_acq_rel(&t->duplicates, 1);
            pcm_store_relaxed(&n->payload, (pcm_word_t)n ^ me ^ i);
            held[got++] = n;
        }
        pops += got;
        while (got) {
            struct node *n = held[--got];
            if (pcm_load_relaxed(&n->payload) != ((pcm_word_t)n ^ me ^ i))
                pcm_fetch_add_acq_rel(&t->corrupted, 1);
            if (pcm_swap_acq_rel(&n->holder, 0) != me)
                pcm_fetch_add_acq_rel(&t->duplicates, 1);
            treiber_push(t, n);
        }
    }
    pcm_fetch_add_acq_rel(&t->pops, pops);
}

PCM_TEST(cas2_treiber_stack_torture)
{
    if (!arch_test_ready())
        return;
    unsigned threads = pcm_test_threads();
    ARCH_FOR_EACH_VARIANT(variant) {
        /* Fewer nodes than threads x 4 keeps the stack often empty and the
         * same few nodes cycling through the top: the ABA-prone regime. */
        unsigned nodes = threads * 2;
        size_t bytes = sizeof(struct treiber) + nodes * sizeof(struct node) + nodes;
        struct treiber *t = pcm_test_shared_alloc(bytes);
        PCM_REQUIRE(t, "shared memory");
        t->node = (struct node *)(t + 1);
        unsigned char *seen_count = (unsigned char *)(t->node + nodes);
        t->nodes = nodes;
        t->per_worker = pcm_test_scale(150000);
        t->seed = pcm_test_seed();
        for (unsigned i = 0; i < nodes; i++)
            treiber_push(t, &t->node[i]);

        pcm_test_run_workers(threads, treiber_worker, t);

        unsigned on_stack = 0;
        bool foreign = false;
        for (struct node *n = (struct node *)t->head.half.ptr; n && on_stack <= nodes;
             n = (struct node *)n->next) {
            if (n < t->node || n >= t->node + nodes) {
                foreign = true;
                break;
            }
            seen_count[n - t->node]++;
            on_stack++;
        }
        unsigned missing = 0, twice = 0;
        for (unsigned i = 0; i < nodes; i++) {
            missing += seen_count[i] == 0;
            twice += seen_count[i] > 1;
        }
        PCM_CHECK(!foreign, "%s: stack links outside the node array", variant);
        PCM_CHECK(on_stack == nodes && missing == 0 && twice == 0,
                  "%s: %u threads, %lu rounds: %u of %u nodes on the stack, %u missing, %u twice", variant,
                  threads, t->per_worker, on_stack, nodes, missing, twice);
        PCM_CHECK(t->duplicates == 0 && t->corrupted == 0,
                  "%s: %u threads: %lu nodes popped twice at once, %lu payloads overwritten", variant,
                  threads, (unsigned long)t->duplicates, (unsigned long)t->corrupted);
        pcm_test_printf("  %s: %u threads, %lu pops and as many pushes\n", variant, threads,
                        (unsigned long)t->pops);
        pcm_test_shared_free(t, bytes);
    }
}
