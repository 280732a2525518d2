/*
 * cpu_relax.c - the spin-wait hint has no semantics to test beyond "it
 * returns and keeps a spin loop re-reading memory": a waiter spinning with
 * it must see a flag another worker sets.
 */
#include "arch_test.h"

struct spin {
    volatile pcm_word_t flag;
    volatile pcm_word_t spins;
};

static void spin_worker(void *arg, unsigned index)
{
    struct spin *s = arg;
    if (index == 1) {
        for (unsigned i = 0; i < 1000; i++)
            pcm_cpu_relax();
        pcm_store_release(&s->flag, 1);
        return;
    }
    pcm_word_t spins = 0;
    while (!pcm_load_relaxed(&s->flag)) { /* relaxed: relax must force a re-read */
        pcm_cpu_relax();
        spins++;
    }
    pcm_store_relaxed(&s->spins, spins);
}

PCM_TEST(cpu_relax_spin_wait_ends)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        struct spin *s = pcm_test_shared_alloc(sizeof *s);
        PCM_REQUIRE(s, "shared memory");
        pcm_test_run_workers(2, spin_worker, s);
        PCM_CHECK(s->flag == 1, "%s: flag never set", variant);
        pcm_test_shared_free(s, sizeof *s);
    }
}
