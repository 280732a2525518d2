/*
 * load_store.c - loads and stores: relaxed round trips of every bit
 * pattern width, and release/acquire message passing between workers.
 */
#include "arch_test.h"

PCM_TEST(load_store_round_trip)
{
    if (!arch_test_ready())
        return;
    static const pcm_word_t values[] = {0, 1, 0x80, (pcm_word_t)-1, (pcm_word_t)-1 >> 1,
                                        (pcm_word_t)1 << (sizeof(pcm_word_t) * 8 - 1),
                                        (pcm_word_t)0x0123456789abcdefULL};
    volatile pcm_word_t word = 0;
    for (unsigned i = 0; i < sizeof values / sizeof values[0]; i++) {
        pcm_store_relaxed(&word, values[i]);
        PCM_CHECK(pcm_load_relaxed(&word) == values[i], "relaxed value %lx", (unsigned long)values[i]);
        pcm_store_release(&word, ~values[i]);
        PCM_CHECK(pcm_load_acquire(&word) == ~values[i], "acquire value %lx", (unsigned long)~values[i]);
    }
}

/* Message passing: the writer fills a payload with relaxed stores, then
 * publishes the round number with a release store; a reader that sees the
 * round with an acquire load must see the whole payload of that round. */
#define MP_PAYLOAD 16

struct message_passing {
    volatile pcm_word_t round;
    volatile pcm_word_t payload[MP_PAYLOAD];
    volatile pcm_word_t mismatches;
    unsigned long rounds;
};

static void message_passing_worker(void *arg, unsigned index)
{
    struct message_passing *mp = arg;
    unsigned spins = 0;
    if (index == 0) {
        for (pcm_word_t r = 1; r <= mp->rounds; r++) {
            for (unsigned i = 0; i < MP_PAYLOAD; i++)
                pcm_store_relaxed(&mp->payload[i], r * MP_PAYLOAD + i);
            pcm_store_release(&mp->round, r);
            /* wait until the reader acknowledged this round */
            while (pcm_load_acquire(&mp->round) == r)
                arch_test_spin(&spins);
        }
        return;
    }
    for (pcm_word_t r = 1; r <= mp->rounds; r++) {
        while (pcm_load_acquire(&mp->round) != r)
            arch_test_spin(&spins);
        for (unsigned i = 0; i < MP_PAYLOAD; i++)
            if (pcm_load_relaxed(&mp->payload[i]) != r * MP_PAYLOAD + i)
                pcm_fetch_add_acq_rel(&mp->mismatches, 1);
        pcm_store_release(&mp->round, (pcm_word_t)-1); /* acknowledge */
    }
}

PCM_TEST(load_store_release_acquire_message_passing)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        struct message_passing *mp = pcm_test_shared_alloc(sizeof *mp);
        PCM_REQUIRE(mp, "shared memory");
        mp->rounds = pcm_test_scale(20000);
        pcm_test_run_workers(2, message_passing_worker, mp);
        PCM_CHECK(mp->mismatches == 0, "variant %s: %lu stale payload words in %lu rounds", variant,
                  (unsigned long)mp->mismatches, mp->rounds);
        pcm_test_shared_free(mp, sizeof *mp);
    }
}
