/*
 * cas.c - compare-and-swap of a word: success and failure semantics (the
 * value seen comes back in `expected`), the derived one-sided variants, and
 * a counter incremented only by CAS loops from more workers than cores.
 */
#include "arch_test.h"

PCM_TEST(cas_semantics)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        volatile pcm_word_t word = 5;
        pcm_word_t expected = 5;
        PCM_CHECK(pcm_cas_acq_rel(&word, &expected, 7), "%s: matching CAS failed", variant);
        PCM_CHECK(word == 7 && expected == 5, "%s: after success word %lu expected %lu", variant,
                  (unsigned long)word, (unsigned long)expected);

        expected = 5;
        PCM_CHECK(!pcm_cas_acq_rel(&word, &expected, 9), "%s: stale CAS succeeded", variant);
        PCM_CHECK(word == 7, "%s: failed CAS wrote %lu", variant, (unsigned long)word);
        PCM_CHECK(expected == 7, "%s: failed CAS reported %lu, not the value seen", variant,
                  (unsigned long)expected);

        /* all bits of the word take part in the comparison */
        pcm_word_t top = (pcm_word_t)1 << (sizeof(pcm_word_t) * 8 - 1);
        word = top;
        expected = 0;
        PCM_CHECK(!pcm_cas_acq_rel(&word, &expected, 1), "%s: top bit ignored", variant);
        PCM_CHECK(expected == top, "%s: seen %lx", variant, (unsigned long)expected);
        PCM_CHECK(pcm_cas_acquire(&word, &expected, (pcm_word_t)-1), "%s: cas_acquire", variant);
        PCM_CHECK(word == (pcm_word_t)-1, "%s: cas_acquire wrote %lx", variant, (unsigned long)word);
        expected = (pcm_word_t)-1;
        PCM_CHECK(pcm_cas_release(&word, &expected, 0) && word == 0, "%s: cas_release", variant);
    }
}

struct cas_counter {
    volatile pcm_word_t counter;
    volatile pcm_word_t retries;
    unsigned long per_worker;
};

static void cas_counter_worker(void *arg, unsigned index)
{
    (void)index;
    struct cas_counter *c = arg;
    pcm_word_t seen = pcm_load_relaxed(&c->counter);
    pcm_word_t retries = 0;
    for (unsigned long i = 0; i < c->per_worker; i++) {
        while (!pcm_cas_acq_rel(&c->counter, &seen, seen + 1))
            retries++; /* `seen` was refreshed by the failed CAS */
        seen++;
    }
    pcm_fetch_add_acq_rel(&c->retries, retries);
}

PCM_TEST(cas_counter_torture)
{
    if (!arch_test_ready())
        return;
    unsigned threads = pcm_test_threads();
    ARCH_FOR_EACH_VARIANT(variant) {
        struct cas_counter *c = pcm_test_shared_alloc(sizeof *c);
        PCM_REQUIRE(c, "shared memory");
        c->per_worker = pcm_test_scale(200000);
        pcm_test_run_workers(threads, cas_counter_worker, c);
        pcm_word_t want = (pcm_word_t)(c->per_worker * threads);
        PCM_CHECK(c->counter == want, "%s: %u threads x %lu increments: counter %lu, want %lu", variant,
                  threads, c->per_worker, (unsigned long)c->counter, (unsigned long)want);
        pcm_test_shared_free(c, sizeof *c);
    }
}
