/*
 * tests/misuse/hardened_only.c - misuse that only the hardened build
 * (src/hardening.h, libpcmalloc-hardened.so) catches: each case must die
 * of SIGABRT with one line naming the pointer (death.h) when this binary
 * is built with -DPCM_HARDENED (make test-hardened).  Built the default
 * way, each case runs all the same and prints what happened - the default
 * build's cheap checks miss them by design, since they read the free mark
 * in the object, which these cases overwrite - and asserts nothing.
 *
 *   - double free after the program wrote over the freed object (its free
 *     mark is gone; the hardened build's free bit is in the segment
 *     header);
 *   - double free of a pointer whose memory was reused by another size
 *     class, freed there by its new owner, then written through the old
 *     pointer;
 *   - a write after free, found when malloc hands the object out again
 *     (the hardened build fills freed objects and checks the filling);
 *   - a free-list link overwritten after free: the hardened build decodes
 *     it, finds no free object of the heap there and stops, where the
 *     default build follows it.
 *
 * Every child stays on one CPU with one heap, so a free and the next
 * malloc meet in the same per-CPU cache (LIFO: the freed object is the
 * next one handed out).
 */
#include "harness.h"

#include "death.h"
#include "pcmalloc.h"

#include <sched.h>
#include <stdint.h>

/* Hardened: must die as expect_death says.  Default: run it, print. */
static void hardened_death(const char *name, void (*misuse)(void), const char *call, const char *what)
{
#ifdef PCM_HARDENED
    expect_death(name, misuse, call, what);
#else
    (void)call;
    (void)what;
    (void)expect_death; /* (the hardened build's verdict) */
    struct pcm_test_child out = run_in_child(misuse);
    char line[512];
    if (out.signaled)
        pcm_test_printf("  %s: default build: killed by signal %d; \"%s\"\n", name, out.signal,
                        first_line(out.text, line, sizeof line));
    else
        pcm_test_printf("  %s: default build: not detected (exit status %d)\n", name, out.exit_status);
#endif
}

static void double_free_after_overwrite(void)
{
    one_heap();
    char *p = pcm_malloc(64);
    pcm_free(p);
    memset(p, 0, 64); /* use after free: the free mark is gone */
    pcm_free(about_to_misuse(p));
}

PCM_TEST(hardened_double_free_after_the_object_was_overwritten)
{
    hardened_death("double free of a 64-byte object zeroed after its first free", double_free_after_overwrite,
                   "free", "double free");
}

static void double_free_after_reuse_by_another_class(void)
{
    one_heap();
    /* 64 page-aligned objects of 4096 bytes, freed: the per-CPU cache
     * overflows and the flushes give their emptied spans back. */
    enum { OLD = 64 };
    char *old[OLD];
    for (unsigned i = 0; i < OLD; i++)
        if (!(old[i] = pcm_malloc(4096)))
            _exit(SETUP_FAILED);
    for (unsigned i = 0; i < OLD; i++)
        pcm_free(old[i]);
    /* 256-byte objects until one starts where an old object did (256
     * divides a page, so every old pointer is an object boundary of a
     * 256-byte span that reuses its page). */
    for (unsigned made = 0; made < 40000; made++) {
        char *q = pcm_malloc(256);
        if (!q)
            _exit(SETUP_FAILED);
        for (unsigned i = 0; i < OLD; i++) {
            if (old[i] != q)
                continue;
            pcm_free(q);               /* its new owner frees it: correct */
            memset(old[i], 0x41, 32);  /* a write through the stale old pointer */
            pcm_free(about_to_misuse(old[i])); /* and the old owner's double free */
            return;
        }
    }
    _exit(SETUP_FAILED);
}

PCM_TEST(hardened_double_free_after_reuse_by_another_class)
{
    hardened_death("double free of a 4 KiB object whose page now holds a freed 256-byte object",
                   double_free_after_reuse_by_another_class, "free", "double free");
}

static void write_after_free(void)
{
    one_heap();
    char *p = pcm_malloc(100);
    pcm_free(p);
    p[50] = 'x'; /* use after free */
    about_to_misuse(p);
    char *q = pcm_malloc(100); /* LIFO: p again, checked on the way out */
    if (q != p)
        _exit(SETUP_FAILED);
}

PCM_TEST(hardened_write_after_free_is_found_on_reuse)
{
    hardened_death("a byte written into a freed 112-byte object", write_after_free, "malloc", "write after free");
}

static void corrupted_link(void)
{
    one_heap();
    uintptr_t *p = pcm_malloc(64);
    pcm_free(p);
    p[0] = (uintptr_t)0x4141414141414140ull; /* the free-list link, overwritten */
    about_to_misuse(p);
    pcm_malloc(64); /* pops p, reading its link */
    pcm_malloc(64); /* the default build follows it here */
}

PCM_TEST(hardened_corrupted_free_list_link_is_not_followed)
{
    hardened_death("a freed 64-byte object's link overwritten", corrupted_link, NULL, "corrupted free list");
}

/* Control: the same steps done correctly die of nothing. */
static void correct_reuse(void)
{
    one_heap();
    char *p = pcm_malloc(100);
    memset(p, 1, 100);
    pcm_free(p);
    char *q = pcm_malloc(100);
    memset(q, 2, 100);
    pcm_free(q);
    for (unsigned i = 0; i < 10000; i++)
        pcm_free(pcm_malloc(16 + i % 2000));
}

PCM_TEST(hardened_control_correct_use_survives)
{
    expect_survival("malloc, write, free, again", correct_reuse);
}
