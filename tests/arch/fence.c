/*
 * fence.c - fences.  The full fence is checked with the store-buffering
 * litmus test (x = 1; fence; r0 = y  ||  y = 1; fence; r1 = x): with a full
 * fence, r0 == r1 == 0 is forbidden on every architecture, while without
 * one x86's store buffer and arm64's weak order both allow it.  The same
 * rounds without a fence are run as a control and their count printed, to
 * show the test exercises real reordering where the machine has it.
 */
#include "arch_test.h"

struct litmus {
    struct arch_test_barrier barrier;
    volatile pcm_word_t x, y, r0, r1;
    volatile pcm_word_t forbidden;
    unsigned long rounds;
    int fenced;
};

static void litmus_worker(void *arg, unsigned index)
{
    struct litmus *l = arg;
    volatile pcm_word_t *mine = index ? &l->y : &l->x;
    volatile pcm_word_t *other = index ? &l->x : &l->y;
    volatile pcm_word_t *result = index ? &l->r1 : &l->r0;
    for (unsigned long i = 0; i < l->rounds; i++) {
        arch_test_barrier_wait(&l->barrier, 2);
        pcm_store_relaxed(mine, 1);
        if (l->fenced)
            pcm_fence_full();
        pcm_store_relaxed(result, pcm_load_relaxed(other));
        arch_test_barrier_wait(&l->barrier, 2);
        if (index == 0) {
            if (l->r0 == 0 && l->r1 == 0)
                pcm_fetch_add_acq_rel(&l->forbidden, 1);
            pcm_store_relaxed(&l->x, 0);
            pcm_store_relaxed(&l->y, 0);
        }
    }
}

static unsigned long litmus_run(int fenced)
{
    struct litmus *l = pcm_test_shared_alloc(sizeof *l);
    if (!l)
        return (unsigned long)-1;
    l->rounds = pcm_test_scale(100000);
    l->fenced = fenced;
    pcm_test_run_workers(2, litmus_worker, l);
    unsigned long n = l->forbidden;
    pcm_test_shared_free(l, sizeof *l);
    return n;
}

PCM_TEST(fence_full_store_buffering)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        unsigned long with = litmus_run(1), without = litmus_run(0);
        PCM_CHECK(with == 0, "%s: store buffering seen %lu times despite the full fence", variant, with);
        pcm_test_printf("  %s: %lu rounds; reordered without a fence (control): %lu\n", variant,
                        pcm_test_scale(100000), without);
    }
}

/* Acquire and release fences: message passing with relaxed accesses, the
 * order given by a release fence before the flag store and an acquire fence
 * after the flag load. */
struct fenced_mp {
    volatile pcm_word_t flag, data, stale;
    unsigned long rounds;
};

static void fenced_mp_worker(void *arg, unsigned index)
{
    struct fenced_mp *m = arg;
    unsigned spins = 0;
    for (pcm_word_t r = 1; r <= m->rounds; r++) {
        if (index == 0) {
            pcm_store_relaxed(&m->data, r);
            pcm_fence_release();
            pcm_store_relaxed(&m->flag, r);
            while (pcm_load_relaxed(&m->flag) == r)
                arch_test_spin(&spins);
        } else {
            while (pcm_load_relaxed(&m->flag) != r)
                arch_test_spin(&spins);
            pcm_fence_acquire();
            if (pcm_load_relaxed(&m->data) != r)
                pcm_fetch_add_acq_rel(&m->stale, 1);
            pcm_fence_release(); /* the data read completes before the ack */
            pcm_store_relaxed(&m->flag, 0);
        }
    }
}

PCM_TEST(fence_acquire_release_message_passing)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        struct fenced_mp *m = pcm_test_shared_alloc(sizeof *m);
        PCM_REQUIRE(m, "shared memory");
        m->rounds = pcm_test_scale(20000);
        pcm_test_run_workers(2, fenced_mp_worker, m);
        PCM_CHECK(m->stale == 0, "%s: %lu stale reads in %lu rounds", variant, (unsigned long)m->stale,
                  m->rounds);
        pcm_test_shared_free(m, sizeof *m);
    }
}
