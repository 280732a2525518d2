/*
 * fetch_add.c - fetch-and-add (and the derived fetch-and-sub): returned old
 * values, wrap-around, and counters from more workers than cores reaching
 * the exact total.
 */
#include "arch_test.h"

PCM_TEST(fetch_add_semantics)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        volatile pcm_word_t word = 40;
        PCM_CHECK(pcm_fetch_add_acq_rel(&word, 2) == 40 && word == 42, "%s: add 2 gave %lu", variant,
                  (unsigned long)word);
        PCM_CHECK(pcm_fetch_sub_acq_rel(&word, 42) == 42 && word == 0, "%s: sub 42 gave %lu", variant,
                  (unsigned long)word);
        PCM_CHECK(pcm_fetch_sub_acq_rel(&word, 1) == 0 && word == (pcm_word_t)-1, "%s: wrap below 0",
                  variant);
        PCM_CHECK(pcm_fetch_add_acq_rel(&word, 3) == (pcm_word_t)-1 && word == 2, "%s: wrap above max",
                  variant);
        PCM_CHECK(pcm_fetch_add_acq_rel(&word, 0) == 2 && word == 2, "%s: add 0", variant);
    }
}

struct add_counters {
    volatile pcm_word_t ones;      /* every worker adds 1 */
    volatile pcm_word_t weighted;  /* worker i adds i + 1 */
    volatile pcm_word_t balance;   /* +5 then -5: ends where it began */
    unsigned long per_worker;
};

static void add_worker(void *arg, unsigned index)
{
    struct add_counters *c = arg;
    for (unsigned long i = 0; i < c->per_worker; i++) {
        pcm_fetch_add_acq_rel(&c->ones, 1);
        pcm_fetch_add_acq_rel(&c->weighted, index + 1);
        pcm_fetch_add_acq_rel(&c->balance, 5);
        pcm_fetch_sub_acq_rel(&c->balance, 5);
    }
}

PCM_TEST(fetch_add_counter_torture)
{
    if (!arch_test_ready())
        return;
    unsigned threads = pcm_test_threads();
    ARCH_FOR_EACH_VARIANT(variant) {
        struct add_counters *c = pcm_test_shared_alloc(sizeof *c);
        PCM_REQUIRE(c, "shared memory");
        c->per_worker = pcm_test_scale(250000);
        c->balance = 1000;
        pcm_test_run_workers(threads, add_worker, c);
        pcm_word_t ones = (pcm_word_t)(c->per_worker * threads);
        pcm_word_t weighted = (pcm_word_t)(c->per_worker * threads * (threads + 1) / 2);
        PCM_CHECK(c->ones == ones, "%s: %u threads: ones %lu want %lu", variant, threads,
                  (unsigned long)c->ones, (unsigned long)ones);
        PCM_CHECK(c->weighted == weighted, "%s: %u threads: weighted %lu want %lu", variant, threads,
                  (unsigned long)c->weighted, (unsigned long)weighted);
        PCM_CHECK(c->balance == 1000, "%s: balance %lu want 1000", variant, (unsigned long)c->balance);
        pcm_test_shared_free(c, sizeof *c);
    }
}
