/*
 * tests/unit/large.c - large objects' mappings (src/large.c) and the map
 * that finds them (src/segment_map.c): each mapping starts on a granule
 * (PCM_MAP_GRANULE: 4 MiB on 64-bit, 64 KiB on 32-bit), every granule it
 * covers names its header and no other, the granules it gives back by
 * realloc and by unmapping name no one, and so many large objects fit at
 * once as the address space holds.  On 32-bit, before the granule, a
 * large object took a whole 4 MiB chunk of address space: 1020 objects of
 * 300,000 bytes filled 4 GiB, and malloc said ENOMEM after 292 MiB.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "layout.h"
#include "segment_map.h"

#include <stdint.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* The header of a large object from pcm_malloc (page alignment). */
static void *header_of(void *p)
{
    return (char *)p - PCM_PAGE_SIZE;
}

static bool on_a_granule(const void *p)
{
    return ((uintptr_t)p & (PCM_MAP_GRANULE - 1)) == 0;
}

PCM_TEST(large_mappings_start_on_granules_that_name_them)
{
    static const size_t sizes[] = {PCM_SMALL_MAX + 1, 300000, MIB, 5 * MIB + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = pcm_malloc(sizes[i]);
        PCM_CHECK(p != NULL, "malloc(%zu) failed", sizes[i]);
        if (!p)
            continue;
        void *header = header_of(p);
        PCM_CHECK(on_a_granule(header), "malloc(%zu): mapping at %p, not on a %zu-byte granule", sizes[i], header,
                  PCM_MAP_GRANULE);
        PCM_CHECK(pcm_segment_map_find(p) == header, "malloc(%zu): the map names %p for its start, not %p", sizes[i],
                  pcm_segment_map_find(p), header);
        PCM_CHECK(pcm_segment_map_find(p + sizes[i] - 1) == header, "malloc(%zu): the map names %p for its end",
                  sizes[i], pcm_segment_map_find(p + sizes[i] - 1));
        PCM_CHECK(pcm_segment_index_kind(p) == PCM_INDEX_NONE, "malloc(%zu): a large object's chunk in the index",
                  sizes[i]);
        pcm_free(p);
    }
}

/* 64 objects of 300,000 bytes: their mappings of 304 KiB, on 64 KiB
 * granules, leave no 4 MiB chunk to one of them, where the kernel places
 * its mappings next to each other (as Linux does, top down). */
PCM_TEST(large_mappings_share_a_chunk_on_32_bit)
{
    enum { N = 64 };
    char *p[N];
    unsigned shared = 0;
    for (unsigned i = 0; i < N; i++) {
        p[i] = pcm_malloc(300000);
        PCM_CHECK(p[i] != NULL, "malloc(300000) #%u failed", i);
    }
    for (unsigned i = 0; i < N; i++)
        for (unsigned j = i + 1; j < N; j++)
            if (p[i] && p[j] && (uintptr_t)p[i] >> PCM_SEGMENT_SHIFT == (uintptr_t)p[j] >> PCM_SEGMENT_SHIFT)
                shared++;
    if (PCM_MAP_GRANULE < PCM_SEGMENT_SIZE)
        PCM_CHECK(shared > 0, "no two of %d large objects in one 4 MiB chunk", N);
    else
        PCM_CHECK(shared == 0, "%u pairs of large objects in one chunk, on segment-aligned mappings", shared);
    for (unsigned i = 0; i < N; i++)
        pcm_free(p[i]);
}

/* 2000 objects of 300,000 bytes live at once, each stamped at both ends
 * with its number: 572 MiB of objects in 625 MiB of address space on
 * 32-bit (a 304 KiB mapping on five 64 KiB granules each), within the 3
 * GiB a 32-bit process has (glibc holds 14,132 of them in qemu-i386's 4
 * GiB). */
PCM_TEST(many_large_objects_live_at_once)
{
    enum { N = 2000 };
    const size_t size = 300000;
    static uint32_t *objects[N];
    unsigned made = 0;
    for (; made < N; made++) {
        uint32_t *p = pcm_malloc(size);
        if (!p)
            break;
        p[0] = made;
        p[size / sizeof *p - 1] = ~made;
        objects[made] = p;
    }
    PCM_CHECK(made == N, "malloc(%zu) failed after %u objects (%zu MiB)", size, made, made * size / MIB);
    unsigned bad = 0;
    for (unsigned i = 0; i < made; i++) {
        uint32_t *p = objects[i];
        if ((p[0] != i || p[size / sizeof *p - 1] != ~i) && bad++ < 5)
            PCM_CHECK(false, "object %u at %p: stamps %u and %u", i, (void *)p, p[0], p[size / sizeof *p - 1]);
        if (pcm_segment_map_find(p) != header_of(p) && bad++ < 5)
            PCM_CHECK(false, "object %u at %p: the map names %p", i, (void *)p, pcm_segment_map_find(p));
    }
    for (unsigned i = 0; i < made; i++)
        pcm_free(objects[i]);
    pcm_malloc_trim(0); /* every mapping unmapped: none of their granules names anyone */
    for (unsigned i = 0; i < made; i++)
        if (pcm_segment_map_find(objects[i]) && bad++ < 5)
            PCM_CHECK(false, "object %u at %p: unmapped, but the map names %p", i, (void *)objects[i],
                      pcm_segment_map_find(objects[i]));
}

/* realloc shrinking by more than half gives back the tail: the granules
 * past the one the object now ends in name no one; the one it ends in
 * still names it (the rest of that granule is unmapped and no other
 * mapping of pcmalloc's can start there). */
PCM_TEST(shrinking_forgets_the_granules_given_back)
{
    char *p = pcm_malloc(12 * MIB);
    PCM_CHECK(p != NULL, "malloc(12 MiB) failed");
    if (!p)
        return;
    void *header = header_of(p);
    char *q = pcm_realloc(p, 300000);
    PCM_CHECK(q == p, "shrinking moved the object from %p to %p", (void *)p, (void *)q);
    if (q != p) {
        pcm_free(q);
        return;
    }
    uintptr_t end = (uintptr_t)header + PCM_ALIGN_UP(PCM_PAGE_SIZE + 300000, PCM_PAGE_SIZE);
    uintptr_t kept = PCM_ALIGN_UP(end, PCM_MAP_GRANULE);
    PCM_CHECK(pcm_segment_map_find((void *)(end - 1)) == header, "the object's last byte: the map names %p",
              pcm_segment_map_find((void *)(end - 1)));
    PCM_CHECK(pcm_segment_map_find((void *)(kept - 1)) == header, "the rest of its last granule: the map names %p",
              pcm_segment_map_find((void *)(kept - 1)));
    for (uintptr_t at = kept; at < (uintptr_t)header + 12 * MIB; at += PCM_MAP_GRANULE)
        if (pcm_segment_map_find((void *)at)) {
            PCM_CHECK(false, "%p, given back, still names %p", (void *)at, pcm_segment_map_find((void *)at));
            break;
        }
    pcm_free(q);
}
