/*
 * tests/misuse/death.c - misuse of the API that pcmalloc must catch: an
 * invalid pointer, a double free, a wrong size.  Each must end the process
 * with SIGABRT after one line on stderr that starts "pcmalloc: ", names
 * the call ("free(): ", "realloc(): ", ...) and the pointer as %p prints
 * it, and says what was wrong ("invalid pointer", "double free", ...).
 *
 * Each case runs in a forked child (death.h).  Control cases check that
 * correct calls do not die.  Misuse of an object whose span was given back
 * or reused by another class is in death_reuse.c.
 *
 * Misuse that pcmalloc's cheap checks cannot see (by design: no check
 * that costs more than a lookup and a compare), so not tested here:
 *   - a double free after the object was handed out again, by the same
 *     class or (death_reuse.c) by another class whose object starts at the
 *     same address: the second free frees the new, live owner's object;
 *   - free of an object boundary that a span has cut but not handed out
 *     (it waits in a cache or on the span's free list): its free mark
 *     makes that a "double free", which is the right verdict only loosely;
 *   - free_sized with a size of the right class (or up to four times
 *     smaller: realloc's growth headroom), or on a large object any size
 *     up to its usable size (a shrinking realloc may leave it so).
 */
#include "harness.h"

#include "death.h"
#include "layout.h"
#include "pcmalloc.h"
#include "segment.h"
#include "segment_map.h"
#include "segment_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- invalid pointers ---- */

static void free_stack_address(void)
{
    char buffer[64];
    __asm__ __volatile__("" : : "r"(buffer) : "memory"); /* a real stack object */
    pcm_free(about_to_misuse(buffer + 16));
}

PCM_TEST(death_free_of_a_stack_address)
{
    expect_death("free of a stack address", free_stack_address, "free", "invalid pointer");
}

static char static_array[256] __attribute__((aligned(16)));

static void free_static_array(void)
{
    pcm_free(about_to_misuse(static_array));
}

PCM_TEST(death_free_of_a_static_array)
{
    expect_death("free of a static array", free_static_array, "free", "invalid pointer");
}

static void free_libc_malloc_pointer(void)
{
    pcm_free(about_to_misuse(malloc(100))); /* the C library's heap */
}

PCM_TEST(death_free_of_a_pointer_from_the_c_librarys_malloc)
{
    expect_death("free of a libc malloc pointer", free_libc_malloc_pointer, "free", "invalid pointer");
}

static void free_middle_of_small_object(void)
{
    char *p = pcm_malloc(64);
    pcm_free(about_to_misuse(p + 16));
}

PCM_TEST(death_free_of_the_middle_of_a_small_object)
{
    expect_death("free(p + 16) of a 64-byte object", free_middle_of_small_object, "free", "invalid pointer");
}

static void free_unaligned_small_pointer(void)
{
    char *p = pcm_malloc(24);
    pcm_free(about_to_misuse(p + 1));
}

PCM_TEST(death_free_of_an_unaligned_pointer_into_a_small_object)
{
    expect_death("free(p + 1) of a 24-byte object", free_unaligned_small_pointer, "free", "invalid pointer");
}

/* The first slot not cut yet in the span 16-byte objects come from, once
 * that span has cut at least `least` of them and has uncut ones left (a
 * refill cuts 64 of 1024): a well-formed address no malloc ever returned. */
static char *first_uncut_16_byte_slot(uint32_t least)
{
    struct pcm_span *span;
    do {
        char *p = pcm_malloc(16);
        span = pcm_span_of(pcm_segment_of(p), p);
    } while (span->carved < least || span->carved >= pcm_span_capacity(span));
    return (char *)(span->start + (uintptr_t)span->carved * span->object_size);
}

static void free_object_never_handed_out(void)
{
    /* An object boundary past what the span has cut so far. */
    pcm_free(about_to_misuse(first_uncut_16_byte_slot(0)));
}

PCM_TEST(death_free_of_an_object_never_handed_out)
{
    expect_death("free of a 16-byte slot its span never cut", free_object_never_handed_out, "free",
                 "invalid pointer");
}

static void free_slot_on_a_later_page_never_handed_out(void)
{
    /* The same on a page of the span past its first: a 4096-byte
     * object's span has 8 pages and a refill cuts one or two, so its last
     * slot was never cut. */
    char *p = pcm_malloc(4096);
    struct pcm_span *span = pcm_span_of(pcm_segment_of(p), p);
    uint32_t last = pcm_span_capacity(span) - 1;
    if (span->object_size != 4096 || span->carved > last)
        _exit(SETUP_FAILED);
    pcm_free(about_to_misuse((void *)(span->start + (uintptr_t)last * span->object_size)));
}

PCM_TEST(death_free_of_an_object_never_handed_out_on_a_later_page)
{
    expect_death("free of the last 4096-byte slot of a span that cut a few",
                 free_slot_on_a_later_page_never_handed_out, "free", "invalid pointer");
}

static void free_next_slot_on_a_page_cut_in_part(void)
{
    /* The slot next to the last one cut, on a later page of the span
     * where cutting stopped part way: the check counts objects cut, not
     * pages touched. */
    char *next = first_uncut_16_byte_slot((PCM_PAGE_SIZE + 64) / 16);
    if ((uintptr_t)next % PCM_PAGE_SIZE == 0)
        _exit(SETUP_FAILED);
    pcm_free(about_to_misuse(next));
}

PCM_TEST(death_free_of_an_object_never_handed_out_on_a_page_cut_in_part)
{
    expect_death("free of the first uncut 16-byte slot, past the span's first page",
                 free_next_slot_on_a_page_cut_in_part, "free", "invalid pointer");
}

static void free_segment_header(void)
{
    /* The start of the segment holding a small object: pcmalloc's own
     * memory (the segment header), never an object. */
    char *p = pcm_malloc(64);
    pcm_free(about_to_misuse((void *)((uintptr_t)p & ~(uintptr_t)(PCM_SEGMENT_SIZE - 1))));
}

PCM_TEST(death_free_of_pcmalloc_memory_that_is_no_object)
{
    expect_death("free of a segment header", free_segment_header, "free", "invalid pointer");
}

static void free_middle_of_large_object(void)
{
    char *p = pcm_malloc(1 << 20);
    pcm_free(about_to_misuse(p + 8192));
}

PCM_TEST(death_free_of_the_middle_of_a_large_object)
{
    expect_death("free(p + 8192) of a 1 MiB object", free_middle_of_large_object, "free", "invalid pointer");
}

static void free_large_header(void)
{
    /* The start of a large object's mapping: its header, never the object
     * (which starts a page further on). */
    char *p = pcm_malloc(1 << 20);
    pcm_free(about_to_misuse((void *)((uintptr_t)p & ~(uintptr_t)(PCM_MAP_GRANULE - 1))));
}

PCM_TEST(death_free_of_a_large_objects_header)
{
    expect_death("free of a 1 MiB object's mapping start", free_large_header, "free", "invalid pointer");
}

static void free_past_large_object_in_its_last_granule(void)
{
    /* The mapping, header page and object, is 304 KiB; a page past its
     * end lies in its last granule (64 KiB on 32-bit, 4 MiB on 64-bit),
     * which the map names for the object's header, but is no object (and
     * not mapped by pcmalloc). */
    char *p = pcm_malloc(300000);
    char *end = p - PCM_PAGE_SIZE + PCM_ALIGN_UP(PCM_PAGE_SIZE + 300000, PCM_PAGE_SIZE);
    pcm_free(about_to_misuse(end + PCM_PAGE_SIZE));
}

PCM_TEST(death_free_past_a_large_object_in_its_last_granule)
{
    expect_death("free of a page past a 300,000-byte object's mapping", free_past_large_object_in_its_last_granule,
                 "free", "invalid pointer");
}

static void free_page_in_no_span(void)
{
    /* The last page of a young segment: inside pcmalloc's memory, in no
     * span yet, so never handed out. */
    char *p = pcm_malloc(64);
    char *last = (char *)((uintptr_t)p & ~(uintptr_t)(PCM_SEGMENT_SIZE - 1)) + PCM_SEGMENT_SIZE - 4096;
    if (pcm_span_of(pcm_segment_of(last), last)->class_plus1)
        _exit(SETUP_FAILED);
    pcm_free(about_to_misuse(last));
}

PCM_TEST(death_free_of_a_segment_page_in_no_span)
{
    expect_death("free of a segment page no span holds", free_page_in_no_span, "free", "invalid pointer");
}

/* A pointer into a segment that went to the pool (src/segment_pool.c):
 * its header reads as zeroes and the map names no one there.  On the rseq
 * path the segment is unmapped instead: the index names no segment there
 * either. */
static void free_into_a_segment_given_back(void)
{
    enum { N = 60 }; /* 12 MiB of 200 KiB objects: whole segments */
    static void *objects[N];
    for (unsigned i = 0; i < N; i++)
        if (!(objects[i] = pcm_malloc(200 * 1024)))
            _exit(SETUP_FAILED);
    for (unsigned i = 0; i < N; i++)
        pcm_free(objects[i]);
    pcm_malloc_trim(0);
    for (unsigned i = 0; i < N; i++)
        if (pcm_segment_index_kind(objects[i]) ==
            (pcm_segment_pool_unmaps() ? PCM_INDEX_NONE : PCM_INDEX_POOL))
            pcm_free(about_to_misuse(objects[i]));
    _exit(SETUP_FAILED); /* no segment went to the pool or back to the OS */
}

PCM_TEST(death_free_into_a_segment_given_back)
{
    pcm_free(pcm_malloc(1)); /* set up: the index, which the pool needs, is mapped */
    if (!pcm_segment_pool_enabled())
        return; /* the hardened build pools nothing */
    expect_death("free of an object whose segment went to the pool or the OS", free_into_a_segment_given_back, "free",
                 "invalid pointer");
}

static void free_sized_middle(void)
{
    char *p = pcm_malloc(256);
    pcm_free_sized(about_to_misuse(p + 128), 128);
}

PCM_TEST(death_free_sized_of_the_middle_of_an_object)
{
    expect_death("free_sized(p + 128, 128) of a 256-byte object", free_sized_middle, "free_sized",
                 "invalid pointer");
}

static void realloc_stack_address(void)
{
    char buffer[64];
    __asm__ __volatile__("" : : "r"(buffer) : "memory");
    pcm_realloc(about_to_misuse(buffer), 100);
}

PCM_TEST(death_realloc_of_a_stack_address)
{
    expect_death("realloc of a stack address", realloc_stack_address, "realloc", "invalid pointer");
}

static void usable_size_of_static_array(void)
{
    pcm_malloc_usable_size(about_to_misuse(static_array + 32));
}

PCM_TEST(death_malloc_usable_size_of_a_foreign_pointer)
{
    expect_death("malloc_usable_size of a static array", usable_size_of_static_array, "malloc_usable_size",
                 "invalid pointer");
}

/* ---- double frees ---- */

static void double_free_small_immediately(void)
{
    void *p = pcm_malloc(64);
    pcm_free(p);
    pcm_free(about_to_misuse(p));
}

PCM_TEST(death_double_free_of_a_small_object)
{
    expect_death("double free of a 64-byte object", double_free_small_immediately, "free", "double free");
}

static void double_free_small_after_other_allocation(void)
{
    void *p = pcm_malloc(64), *q = pcm_malloc(64);
    pcm_free(p);
    pcm_free(q);
    void *r = pcm_malloc(64); /* another object of the class (q, the last freed) */
    (void)r;
    pcm_free(about_to_misuse(p));
}

PCM_TEST(death_double_free_after_another_allocation_of_the_class)
{
    expect_death("double free after another 64-byte allocation", double_free_small_after_other_allocation,
                 "free", "double free");
}

static void double_free_small_after_flush(void)
{
    /* Free p, then enough objects of its class to overflow the per-CPU
     * cache: p goes back to its span's free list (q keeps the span in
     * use, so the span is not released). */
    enum { MANY = 3000 };
    static void *others[MANY];
    void *p = pcm_malloc(64), *q = pcm_malloc(64);
    for (unsigned i = 0; i < MANY; i++)
        others[i] = pcm_malloc(64);
    pcm_free(p);
    for (unsigned i = 0; i < MANY; i++)
        pcm_free(others[i]);
    (void)q;
    pcm_free(about_to_misuse(p));
}

PCM_TEST(death_double_free_after_the_cache_was_flushed)
{
    expect_death("double free after 3000 more frees of the class", double_free_small_after_flush, "free",
                 "double free");
}

static void *free_on_another_thread(void *p)
{
    pcm_free(p);
    return NULL;
}

static void double_free_after_free_on_another_thread(void)
{
    void *p = pcm_malloc(48);
    pthread_t thread;
    if (pthread_create(&thread, NULL, free_on_another_thread, p) || pthread_join(thread, NULL))
        _exit(3);
    pcm_free(about_to_misuse(p));
}

PCM_TEST(death_double_free_after_a_free_on_another_thread)
{
    expect_death("double free after a free on another thread", double_free_after_free_on_another_thread, "free",
                 "double free");
}

static void double_free_large(void)
{
    void *p = pcm_malloc(1 << 20);
    pcm_free(p);
    pcm_free(about_to_misuse(p));
}

PCM_TEST(death_double_free_of_a_large_object)
{
    expect_death("double free of a 1 MiB object", double_free_large, "free", "double free");
}

static void double_free_huge(void)
{
    /* Too big for the cache of freed mappings: unmapped at the first free,
     * so the second finds no owner (an invalid pointer, not a double free,
     * is all pcmalloc can say then). */
    void *p = pcm_malloc((size_t)32 << 20);
    pcm_free(p);
    pcm_free(about_to_misuse(p));
}

PCM_TEST(death_double_free_of_an_unmapped_large_object)
{
    expect_death("double free of a 32 MiB object", double_free_huge, "free", NULL);
}

/* ---- realloc and usable size of freed pointers ---- */

static void realloc_freed_small(void)
{
    void *p = pcm_malloc(100);
    pcm_free(p);
    pcm_realloc(about_to_misuse(p), 200);
}

PCM_TEST(death_realloc_of_a_freed_small_object)
{
    expect_death("realloc of a freed 100-byte object", realloc_freed_small, "realloc", "double free");
}

static void realloc_freed_large(void)
{
    void *p = pcm_malloc(1 << 20);
    pcm_free(p);
    pcm_realloc(about_to_misuse(p), 2 << 20);
}

PCM_TEST(death_realloc_of_a_freed_large_object)
{
    expect_death("realloc of a freed 1 MiB object", realloc_freed_large, "realloc", "double free");
}

static void realloc_zero_of_freed(void)
{
    void *p = pcm_malloc(100);
    pcm_free(p);
    pcm_realloc(about_to_misuse(p), 0);
}

PCM_TEST(death_realloc_to_zero_of_a_freed_object)
{
    expect_death("realloc(p, 0) of a freed object", realloc_zero_of_freed, "realloc", "double free");
}

static void usable_size_of_freed(void)
{
    void *p = pcm_malloc(100);
    pcm_free(p);
    pcm_malloc_usable_size(about_to_misuse(p));
}

PCM_TEST(death_malloc_usable_size_of_a_freed_object)
{
    expect_death("malloc_usable_size of a freed 100-byte object", usable_size_of_freed, "malloc_usable_size",
                 NULL);
}

/* ---- wrong sizes and alignments ---- */

static void free_sized_wrong_small(void)
{
    void *p = pcm_malloc(64);
    pcm_free_sized(about_to_misuse(p), 1000);
}

PCM_TEST(death_free_sized_with_a_wrong_size)
{
    expect_death("free_sized(64-byte object, 1000)", free_sized_wrong_small, "free_sized", "size 1000");
}

static void free_sized_too_small_for_class(void)
{
    void *p = pcm_malloc(1000);
    pcm_free_sized(about_to_misuse(p), 10);
}

PCM_TEST(death_free_sized_with_a_smaller_class)
{
    expect_death("free_sized(1000-byte object, 10)", free_sized_too_small_for_class, "free_sized", "size 10");
}

static void free_sized_wrong_large(void)
{
    void *p = pcm_malloc(1 << 20);
    pcm_free_sized(about_to_misuse(p), 3 << 20);
}

PCM_TEST(death_free_sized_of_a_large_object_with_a_larger_size)
{
    expect_death("free_sized(1 MiB object, 3 MiB)", free_sized_wrong_large, "free_sized", "does not match");
}

static void free_sized_of_freed(void)
{
    void *p = pcm_malloc(64);
    pcm_free(p);
    pcm_free_sized(about_to_misuse(p), 64);
}

PCM_TEST(death_free_sized_of_a_freed_object)
{
    expect_death("free_sized of a freed object", free_sized_of_freed, "free_sized", "double free");
}

static void free_aligned_sized_wrong_alignment(void)
{
    /* A 48-byte object not on a page boundary (a span's first one is, and
     * on several CPUs two allocations in a row may both be first ones). */
    char *misaligned;
    do
        misaligned = pcm_malloc(48);
    while ((uintptr_t)misaligned % 4096 == 0);
    pcm_free_aligned_sized(about_to_misuse(misaligned), 4096, 48);
}

PCM_TEST(death_free_aligned_sized_with_a_wrong_alignment)
{
    expect_death("free_aligned_sized(48-byte object, 4096)", free_aligned_sized_wrong_alignment,
                 "free_aligned_sized", "alignment 4096");
}

/* Regression: a size beyond the small range on a small object passed the
 * check as if it named the smallest class (api.c check_size), so a 16-48
 * byte object was freed with free_sized(p, SIZE_MAX) without a word. */
static void free_sized_beyond_small_range(void)
{
    void *p = pcm_malloc(32);
    pcm_free_sized(about_to_misuse(p), SIZE_MAX);
}

PCM_TEST(death_free_sized_of_a_small_object_with_a_size_only_large_objects_have)
{
    expect_death("free_sized(32-byte object, SIZE_MAX)", free_sized_beyond_small_range, "free_sized",
                 "does not match");
}

static void free_sized_just_beyond_small_range(void)
{
    void *p = pcm_malloc(20);
    pcm_free_sized(about_to_misuse(p), 300000);
}

PCM_TEST(death_free_sized_of_a_small_object_with_a_large_size)
{
    expect_death("free_sized(20-byte object, 300000)", free_sized_just_beyond_small_range, "free_sized",
                 "does not match");
}

/* The same through free_aligned_sized: an alignment above a page is only
 * ever served by a large object, so a small object that happens to sit on
 * such a boundary (the first of a span) must not pass as one. */
static void free_aligned_sized_small_object_large_alignment(void)
{
    char *p;
    unsigned tries = 0;
    do { /* leaked on purpose: the child dies anyway */
        p = pcm_malloc(16);
        if (++tries > 100000)
            _exit(SETUP_FAILED);
    } while ((uintptr_t)p % 8192);
    pcm_free_aligned_sized(about_to_misuse(p), 8192, 16);
}

PCM_TEST(death_free_aligned_sized_of_a_small_object_with_a_large_alignment)
{
    expect_death("free_aligned_sized(8 KiB-aligned 16-byte object, 8192, 16)",
                 free_aligned_sized_small_object_large_alignment, "free_aligned_sized", "does not match");
}

static void free_sized_zero_of_a_larger_object(void)
{
    void *p = pcm_malloc(200);
    pcm_free_sized(about_to_misuse(p), 0);
}

PCM_TEST(death_free_sized_with_size_zero)
{
    expect_death("free_sized(200-byte object, 0)", free_sized_zero_of_a_larger_object, "free_sized",
                 "does not match");
}

/* ---- controls: correct use does not die ---- */

static void correct_use(void)
{
    void *p = pcm_malloc(64);
    pcm_free(p);
    p = pcm_malloc(64);
    pcm_free_sized(p, 64);
    p = pcm_malloc(50);
    pcm_free_sized(p, 60); /* the same class: allowed */
    p = pcm_malloc(1 << 20);
    pcm_free_sized(p, 1 << 20);
    p = pcm_aligned_alloc(4096, 100);
    pcm_free_aligned_sized(p, 4096, 100);
    p = pcm_malloc(100);
    p = pcm_realloc(p, 5000);
    p = pcm_realloc(p, 1 << 20);
    p = pcm_realloc(p, 10);
    pcm_free(p);
    pcm_free(NULL);
    pcm_free_sized(NULL, 123);
    void *q = pcm_realloc(pcm_malloc(10), 0); /* frees, returns NULL */
    if (q)
        _exit(4);
    /* Freed and handed out again: freeing the new owner's object is fine. */
    p = pcm_malloc(64);
    pcm_free(p);
    q = pcm_malloc(64);
    pcm_free(q);
}

PCM_TEST(death_control_correct_use_survives)
{
    expect_survival("correct use", correct_use);
}

static void free_after_free_on_other_thread_of_other_object(void)
{
    void *p = pcm_malloc(48), *q = pcm_malloc(48);
    pthread_t thread;
    if (pthread_create(&thread, NULL, free_on_another_thread, p) || pthread_join(thread, NULL))
        _exit(3);
    pcm_free(q);
}

PCM_TEST(death_control_free_next_to_a_remote_free_survives)
{
    expect_survival("free of a neighbour of a remotely freed object",
                    free_after_free_on_other_thread_of_other_object);
}
