/*
 * swap.c - exchange: the old value comes back; and an exchange-drained
 * multi-producer stack (the shape of pcmalloc's remote-free queues): many
 * producers push by CAS, one consumer takes the whole list with one swap,
 * and every pushed node is delivered exactly once.
 */
#include "arch_test.h"

PCM_TEST(swap_semantics)
{
    if (!arch_test_ready())
        return;
    ARCH_FOR_EACH_VARIANT(variant) {
        volatile pcm_word_t word = 11;
        PCM_CHECK(pcm_swap_acq_rel(&word, 22) == 11 && word == 22, "%s: swap 22", variant);
        PCM_CHECK(pcm_swap_acq_rel(&word, (pcm_word_t)-1) == 22 && word == (pcm_word_t)-1, "%s: swap ~0",
                  variant);
        PCM_CHECK(pcm_swap_acq_rel(&word, 0) == (pcm_word_t)-1 && word == 0, "%s: swap 0", variant);
    }
}

struct msg {
    volatile pcm_word_t next;
    pcm_word_t id;
};

struct mpsc {
    volatile pcm_word_t head;     /* top of the producers' stack, 0 = empty */
    volatile pcm_word_t delivered;
    volatile pcm_word_t drains;
    unsigned producers;
    unsigned long per_producer;
    struct msg *msg;
    unsigned char *received;
};

/* Push needs no tag: it depends only on the identity of the head it links
 * to, and a node is pushed only while the pusher owns it, so whatever the
 * head went through in between, linking to the current head is correct. */
static void mpsc_push(struct mpsc *q, struct msg *m)
{
    pcm_word_t seen = pcm_load_relaxed(&q->head);
    do
        pcm_store_relaxed(&m->next, seen);
    while (!pcm_cas_release(&q->head, &seen, (pcm_word_t)m));
}

static void mpsc_worker(void *arg, unsigned index)
{
    struct mpsc *q = arg;
    if (index > 0) {
        struct msg *mine = q->msg + (unsigned long)(index - 1) * q->per_producer;
        for (unsigned long i = 0; i < q->per_producer; i++)
            mpsc_push(q, &mine[i]);
        return;
    }
    unsigned long total = q->producers * q->per_producer, got = 0;
    unsigned spins = 0;
    while (got < total) {
        /* acquire: the nodes' contents written before their push are visible */
        struct msg *m = (struct msg *)pcm_swap_acq_rel(&q->head, 0);
        if (!m) {
            arch_test_spin(&spins);
            continue;
        }
        pcm_store_relaxed(&q->drains, q->drains + 1);
        for (; m; m = (struct msg *)m->next, got++)
            if (q->received[m->id] < 255)
                q->received[m->id]++;
    }
    pcm_store_release(&q->delivered, got);
}

PCM_TEST(swap_drained_mpsc_stack_torture)
{
    if (!arch_test_ready())
        return;
    unsigned threads = pcm_test_threads();
    ARCH_FOR_EACH_VARIANT(variant) {
        unsigned producers = threads - 1;
        unsigned long per = pcm_test_scale(100000);
        unsigned long total = producers * per;
        size_t bytes = sizeof(struct mpsc) + total * sizeof(struct msg) + total;
        struct mpsc *q = pcm_test_shared_alloc(bytes);
        PCM_REQUIRE(q, "shared memory for %lu messages", total);
        q->producers = producers;
        q->per_producer = per;
        q->msg = (struct msg *)(q + 1);
        q->received = (unsigned char *)(q->msg + total);
        for (unsigned long i = 0; i < total; i++)
            q->msg[i].id = i;

        pcm_test_run_workers(threads, mpsc_worker, q);

        unsigned long lost = 0, repeated = 0;
        for (unsigned long i = 0; i < total; i++) {
            lost += q->received[i] == 0;
            repeated += q->received[i] > 1;
        }
        PCM_CHECK(q->delivered == total && lost == 0 && repeated == 0,
                  "%s: %u producers x %lu: delivered %lu, %lu lost, %lu more than once", variant, producers,
                  per, (unsigned long)q->delivered, lost, repeated);
        PCM_CHECK(q->head == 0, "%s: stack not empty after the last drain", variant);
        pcm_test_printf("  %s: %u producers, %lu messages in %lu drains\n", variant, producers, total,
                        (unsigned long)q->drains);
        pcm_test_shared_free(q, bytes);
    }
}
