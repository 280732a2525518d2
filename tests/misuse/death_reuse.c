/*
 * tests/misuse/death_reuse.c - a pointer freed twice after its memory
 * moved on: its span was given back to the segment, or the pages were cut
 * into a span of another size class.  Where pcmalloc can tell (the page is
 * in no span, or the pointer is not at the start of an object the span
 * has cut), the second call must end with SIGABRT and a message naming the
 * call and the pointer (death.h); where it cannot, that is said below.
 *
 * The situation is brought about step by step and checked on the way
 * through the allocator's own metadata (segment.h): 64 objects of 4096
 * bytes (8 spans of 8) are allocated and freed, so the per-CPU cache
 * overflows and the flushes give the emptied spans back; then objects of
 * 48 bytes are allocated until the given-back pages hold their spans.  The
 * child uses one heap (PCMALLOC_CPUS=1) and stays on one CPU, so every
 * free reaches the heap the test expects.  A child that cannot bring the
 * situation about exits with SETUP_FAILED, which fails the test.
 *
 * Not detectable by the cheap checks (no check beyond a lookup and a
 * compare, design.md), so not tested: a second free of a pointer that is
 * now the start of a live object of the new class (or of the same class,
 * handed out again) frees that object - its owner's data is then lost.
 * If the object there is free too, the free mark catches it as a double
 * free.
 */
#include "harness.h"

#include "death.h"
#include "layout.h"
#include "pcmalloc.h"
#include "segment.h"

#include <sched.h>

#define OLD_SIZE 4096u /* class of the objects freed first: page-aligned */
#define OLD_COUNT 64u
#define NEW_SIZE 48u /* the class that reuses their pages */
#define NEW_MAX 40000u

static void *old_objects[OLD_COUNT];

static struct pcm_span *span_of(void *p)
{
    return pcm_span_of(pcm_segment_of(p), p);
}

/* Allocate and free the old objects; the index of one whose span was
 * given back, or exit with SETUP_FAILED. */
static unsigned free_until_a_span_is_given_back(void)
{
    one_heap();
    for (unsigned i = 0; i < OLD_COUNT; i++)
        if (!(old_objects[i] = pcm_malloc(OLD_SIZE)))
            _exit(SETUP_FAILED);
    for (unsigned i = 0; i < OLD_COUNT; i++)
        pcm_free(old_objects[i]);
    for (unsigned i = 0; i < OLD_COUNT; i++)
        if (span_of(old_objects[i])->class_plus1 == 0)
            return i;
    _exit(SETUP_FAILED);
}

/* After the given-back pages are reused by NEW_SIZE spans: one of the old
 * pointers that now lies inside a new span but not at the start of an
 * object it has cut (mid-object, or past what the span has cut).  Exits
 * with SETUP_FAILED if the pages are not reused within NEW_MAX objects. */
static void *old_pointer_inside_a_new_class_span(void)
{
    free_until_a_span_is_given_back();
    unsigned new_class = 0;
    for (unsigned made = 0; made < NEW_MAX; made++) {
        char *q = pcm_malloc(NEW_SIZE); /* kept: live objects of the new class */
        if (!q)
            _exit(SETUP_FAILED);
        if (!new_class)
            new_class = span_of(q)->class_plus1;
        for (unsigned i = 0; i < OLD_COUNT; i++) {
            struct pcm_span *span = span_of(old_objects[i]);
            if (span->class_plus1 != new_class)
                continue;
            uintptr_t offset = (uintptr_t)old_objects[i] - span->start;
            if (offset % span->object_size || offset / span->object_size >= span->carved)
                return old_objects[i];
        }
    }
    _exit(SETUP_FAILED);
}

static void free_after_span_given_back(void)
{
    unsigned i = free_until_a_span_is_given_back();
    pcm_free(about_to_misuse(old_objects[i]));
}

PCM_TEST(death_double_free_after_the_span_was_given_back)
{
    expect_death("double free of a 4 KiB object whose span was given back", free_after_span_given_back, "free",
                 "invalid pointer");
}

static void realloc_after_span_given_back(void)
{
    unsigned i = free_until_a_span_is_given_back();
    pcm_realloc(about_to_misuse(old_objects[i]), 100);
}

PCM_TEST(death_realloc_of_a_freed_object_whose_span_was_given_back)
{
    expect_death("realloc of a 4 KiB object whose span was given back", realloc_after_span_given_back, "realloc",
                 "invalid pointer");
}

static void free_sized_after_span_given_back(void)
{
    unsigned i = free_until_a_span_is_given_back();
    pcm_free_sized(about_to_misuse(old_objects[i]), OLD_SIZE);
}

PCM_TEST(death_free_sized_of_a_freed_object_whose_span_was_given_back)
{
    expect_death("free_sized of a 4 KiB object whose span was given back", free_sized_after_span_given_back,
                 "free_sized", "invalid pointer");
}

static void free_after_reuse_by_another_class(void)
{
    pcm_free(about_to_misuse(old_pointer_inside_a_new_class_span()));
}

PCM_TEST(death_double_free_after_the_pages_went_to_another_class)
{
    expect_death("double free of a 4 KiB object whose pages now hold 48-byte objects",
                 free_after_reuse_by_another_class, "free", "invalid pointer");
}

static void realloc_after_reuse_by_another_class(void)
{
    pcm_realloc(about_to_misuse(old_pointer_inside_a_new_class_span()), 5000);
}

PCM_TEST(death_realloc_of_a_freed_object_whose_pages_went_to_another_class)
{
    expect_death("realloc of a 4 KiB object whose pages now hold 48-byte objects",
                 realloc_after_reuse_by_another_class, "realloc", "invalid pointer");
}

/* Control: the same steps without the misuse die of nothing. */
static void reuse_without_misuse(void)
{
    void *p = old_pointer_inside_a_new_class_span();
    (void)p;
    void *q = pcm_malloc(OLD_SIZE);
    pcm_free(q);
}

PCM_TEST(death_control_reuse_by_another_class_survives)
{
    expect_survival("give a span back and reuse its pages", reuse_without_misuse);
}
