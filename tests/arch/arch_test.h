/*
 * arch_test.h - what the primitive tests share: start-up of the arch module,
 * running a body once per implementation variant, and a spin barrier.
 * Like every test file here, no libc: these also run freestanding on a
 * K6-class CPU model.  Shared state lives in pcm_test_shared_alloc memory,
 * because workers may be forked processes.
 */
#ifndef PCM_TEST_ARCH_TEST_H
#define PCM_TEST_ARCH_TEST_H

#include "atomic.h"
#include "harness.h"

/* pcm_arch_init once per test; false (with a failure recorded) if the CPU
 * cannot run the module. */
static inline bool arch_test_ready(void)
{
    const char *error = pcm_arch_init();
    if (error) {
        pcm_test_fail(__FILE__, __LINE__, "pcm_arch_init() == NULL", "%s", error);
        return false;
    }
    return true;
}

/* Run the statement once for each variant the CPU supports (arm64: LL/SC
 * and LSE), then restore the start-up choice. */
#define ARCH_FOR_EACH_VARIANT(name_var)                                          \
    for (unsigned arch_v_ = 0, arch_saved_ = pcm_arch_variant_current();         \
         arch_v_ < pcm_arch_variant_count() ||                                   \
         (pcm_arch_variant_select(arch_saved_), 0);                              \
         arch_v_++)                                                              \
        for (const char *name_var = pcm_arch_variant_name(arch_v_);              \
             name_var && pcm_arch_variant_select(arch_v_); name_var = NULL)

/* One step of a test's spin-wait: the hint under test, and every 64th step
 * a yield, so that on an oversubscribed machine a waiter does not burn its
 * whole time slice while the worker it waits for sits on the same core. */
static inline void arch_test_spin(unsigned *spins)
{
    pcm_cpu_relax();
    if (++*spins % 64 == 0)
        pcm_test_yield();
}

/* A reusable spin barrier for `parties` workers: the last arrival bumps the
 * generation; the others spin on it. */
struct arch_test_barrier {
    volatile pcm_word_t arrived;
    volatile pcm_word_t generation;
};

static inline void arch_test_barrier_wait(struct arch_test_barrier *b, pcm_word_t parties)
{
    pcm_word_t generation = pcm_load_acquire(&b->generation);
    if (pcm_fetch_add_acq_rel(&b->arrived, 1) == parties - 1) {
        pcm_store_relaxed(&b->arrived, 0);
        pcm_store_release(&b->generation, generation + 1);
        return;
    }
    unsigned spins = 0;
    while (pcm_load_acquire(&b->generation) == generation)
        arch_test_spin(&spins);
}

#endif
