/*
 * tests/unit/remote.c - pushes onto another heap's remote-free stack
 * (src/remote.c): the depths they mark, and that a push never reads the
 * top it saw, which a drain may have taken and whose segment may be gone.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "free_mark.h"
#include "hardening.h"
#include "heap.h"
#include "remote.h"
#include "segment.h"
#include "sizeclass.h"

#include <sys/mman.h>
#include <unistd.h>

#define SIZE 48u

/* A fresh object's heap (its span's owner) and class. */
static struct pcm_heap *owner_of(void *p)
{
    return &pcm_heaps[pcm_span_of(pcm_segment_of(p), p)->owner];
}

/* Objects on the stack of h's class cls go back to their spans, so the
 * stack starts empty (no other thread pushes in this test). */
static void empty_stack(struct pcm_heap *h, unsigned cls)
{
    pcm_heap_lock(h);
    pcm_heap_drain_remote_list_locked(h, pcm_remote_list(h, cls));
    pcm_heap_unlock(h);
}

/* What free does before a push (the hardened build's free bit), then the
 * push of p as a free on another CPU does it. */
static void free_remotely(struct pcm_heap *h, unsigned cls, void *p)
{
    pcm_hardened_free(pcm_span_of(pcm_segment_of(p), p), p, "free");
    pcm_remote_free(h, cls, p);
}

static pcm_word_t depth_of(void *obj)
{
    return *pcm_object_word1(obj) & PCM_DEPTH_MASK;
}

/* One push after another: every object's depth counts down to 1 at the
 * bottom, as a cache's do (a refill takes the stack as a cache). */
PCM_TEST(remote_pushes_in_turn_mark_exact_depths)
{
    enum { PUSHES = 5 };
    unsigned cls = pcm_size_class(SIZE);
    void *p[PUSHES];
    for (unsigned i = 0; i < PUSHES; i++)
        PCM_REQUIRE(p[i] = pcm_malloc(SIZE), "malloc failed");
    struct pcm_heap *h = owner_of(p[0]);
    for (unsigned i = 1; i < PUSHES; i++)
        PCM_REQUIRE(owner_of(p[i]) == h, "objects of two heaps (a refill went elsewhere)");
    empty_stack(h, cls);
    for (unsigned i = 0; i < PUSHES; i++) {
        free_remotely(h, cls, p[i]);
        PCM_CHECK(pcm_load_relaxed(pcm_remote_list(h, cls)) == (pcm_word_t)p[i], "push %u not on top", i);
        PCM_CHECK(depth_of(p[i]) == i + 1, "push %u: depth %lu, expected %u", i, (unsigned long)depth_of(p[i]),
                  i + 1);
    }
    for (unsigned i = 0; i < PUSHES; i++)
        PCM_CHECK(depth_of(p[i]) == i + 1, "object %u's depth %lu changed by later pushes", i,
                  (unsigned long)depth_of(p[i]));
    empty_stack(h, cls);
}

/* The top a push sees may be drained, its span emptied and its segment
 * unmapped (the rseq path gives empty segments back) before the push
 * reads anything of it, if its thread is preempted in between: here a top
 * on a page that cannot be read at all.  The push must not touch it (it
 * did: it read the top's depth from its word 1) and still links to it -
 * its CAS, not a read, decides whether that top is current. */
PCM_TEST(remote_push_never_reads_the_top_it_saw)
{
    long page = sysconf(_SC_PAGESIZE);
    char *gone = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    PCM_REQUIRE(gone != MAP_FAILED, "mmap failed");
    unsigned cls = pcm_size_class(SIZE);
    void *p = pcm_malloc(SIZE);
    PCM_REQUIRE(p, "malloc failed");
    struct pcm_heap *h = owner_of(p);
    empty_stack(h, cls);
    struct pcm_remote_stack *stack = pcm_remote_stack(h, cls);
    /* a stack of 7 whose top now lies on that page */
    pcm_store_relaxed(&stack->depth_hint, 7);
    pcm_store_relaxed(&stack->top, (pcm_word_t)gone);
    free_remotely(h, cls, p); /* faulted here */
    PCM_CHECK(pcm_load_relaxed(&stack->top) == (pcm_word_t)p, "the push is not on top");
    /* (decoded, not followed: the hardened build's pcm_link_next would
     * rightly refuse a link to no free object) */
    PCM_CHECK(pcm_link_decode(p, *(pcm_word_t *)p) == (pcm_word_t)gone, "the push is not linked to the top it saw");
    PCM_CHECK(depth_of(p) == 8, "depth %lu on a stack of 7, expected 8", (unsigned long)depth_of(p));
    /* p alone goes home; the page was never a stack's */
    pcm_store_relaxed(&stack->top, 0);
    *(pcm_word_t *)p = pcm_link_encode(p, 0);
    pcm_heap_lock(h);
    pcm_heap_return_chain_locked(h, p);
    pcm_heap_unlock(h);
    munmap(gone, (size_t)page);
}
