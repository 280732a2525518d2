/*
 * tests/unit/free_mark.c - the free mark (free_mark.h) never marks a live
 * object by itself: malloc clears word 1 (and word 2 on 32-bit builds) of
 * every object it hands out, so no secret may make those cleared words a
 * mark.  On 32-bit builds the 20-bit mark of word 1 is 0 on the one page
 * that the secret's high bits name: a live object there, its word 2 still
 * holding the wide mark from its time in a cache, was reported as a
 * double free by malloc_usable_size (the CI's i386 run, one process in a
 * few hundred with a purge delay of 1 ms).
 */
#include "harness.h"

#include "pcmalloc.h"

#include "free_mark.h"

#define ROUNDS 8u

/* A secret, as start-up would make it from random bits, whose word-1
 * mark of obj is 0 if any is: obj's address where the mark keeps it. */
static pcm_word_t secret_naming(void *obj)
{
#if UINTPTR_MAX == 0xffffffffu
    return pcm_free_secret_from(((pcm_word_t)obj & ~PCM_DEPTH_MASK) | 0x5a0u);
#else
    return pcm_free_secret_from(((pcm_word_t)obj << PCM_DEPTH_BITS) | 0x5a0u);
#endif
}

PCM_TEST(free_mark_secret_never_marks_a_cleared_object)
{
    void *objects[ROUNDS];
    for (unsigned i = 0; i < ROUNDS; i++) {
        objects[i] = pcm_malloc(64);
        PCM_REQUIRE(objects[i], "malloc(64) failed");
    }
    for (unsigned i = 0; i < ROUNDS; i++) {
        pcm_word_t *word = objects[i];
        pcm_word_t saved[3] = {word[0], word[1], word[2]}, secret = pcm_free_secret;
        /* Marked as a cache marks it (depth 1), then handed out. */
        pcm_free_secret = secret_naming(objects[i]);
        pcm_free_mark_set(objects[i], 1);
        pcm_free_mark_clear(objects[i]);
        bool looks_free = pcm_object_is_marked_free(objects[i]);
        pcm_free_secret = secret;
        word[0] = saved[0], word[1] = saved[1], word[2] = saved[2];
        PCM_CHECK(!looks_free, "%p, handed out, reads as free under the secret 0x%lx", objects[i],
                  (unsigned long)secret_naming(objects[i]));
    }
    for (unsigned i = 0; i < ROUNDS; i++)
        pcm_free(objects[i]);
}

/* The same through free and malloc: an object freed and handed out again
 * under such a secret is live to the checks of free and
 * malloc_usable_size.  Pinned, so that malloc takes it straight back from
 * this CPU's cache. */
PCM_TEST(free_mark_object_handed_out_again_is_live)
{
    int first, last;
    pcm_test_allowed_cpus(&first, &last);
    PCM_REQUIRE(first >= 0 && pcm_test_pin(first), "cannot pin to CPU %d", first);
    void *p = pcm_malloc(64);
    PCM_REQUIRE(p, "malloc(64) failed");
    pcm_word_t secret = pcm_free_secret;
    pcm_free_secret = secret_naming(p);
    pcm_free(p);
    void *q = pcm_malloc(64);
    bool looks_free = q == p && pcm_object_is_marked_free(p);
    pcm_free_secret = secret;
    PCM_CHECK(q == p, "malloc gave %p, not %p, back", q, p);
    PCM_CHECK(!looks_free, "%p, handed out again, reads as free", p);
    if (!looks_free)
        pcm_free(q);
}
