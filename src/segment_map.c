/*
 * segment_map.c - the chunk -> owner map (see segment_map.h).
 *
 * 32-bit: 2^(32-22) = 1024 chunks, one static array.
 * 64-bit: user addresses below 2^48 give 2^26 chunks; a static top level of
 * 2^13 pointers to leaves of 2^13 entries, each leaf mapped on first use
 * (64 KiB; 512 MiB of address space per leaf).  A leaf is installed by
 * CAS: the loser of a race unmaps its own and uses the winner's.  Leaves
 * are never freed, so a reader never sees one disappear.
 * No locks; no malloc.
 */
#include "segment_map.h"

#include "atomic.h"
#include "layout.h"
#include "os.h"

#if UINTPTR_MAX == 0xffffffffu

static volatile pcm_word_t chunk_owner[(size_t)1 << (32 - PCM_SEGMENT_SHIFT)];

static volatile pcm_word_t *entry_of(uintptr_t chunk, bool create)
{
    (void)create;
    return &chunk_owner[chunk];
}

#else

#define PCM_ADDRESS_BITS 48u
#define LEAF_BITS 13u
#define TOP_BITS (PCM_ADDRESS_BITS - PCM_SEGMENT_SHIFT - LEAF_BITS)
#define LEAF_ENTRIES ((size_t)1 << LEAF_BITS)

static volatile pcm_word_t top_level[(size_t)1 << TOP_BITS];

static volatile pcm_word_t *entry_of(uintptr_t chunk, bool create)
{
    uintptr_t top = chunk >> LEAF_BITS;
    if (top >= ((uintptr_t)1 << TOP_BITS))
        return NULL; /* above 2^48: never one of ours (we never map there) */
    /* acquire: a leaf's zeroed contents are visible before we index it */
    pcm_word_t leaf = pcm_load_acquire(&top_level[top]);
    if (!leaf) {
        if (!create)
            return NULL;
        void *fresh = pcm_os_map(LEAF_ENTRIES * sizeof(pcm_word_t));
        if (!fresh)
            return NULL;
        pcm_word_t expected = 0;
        if (pcm_cas_acq_rel(&top_level[top], &expected, (pcm_word_t)fresh)) {
            leaf = (pcm_word_t)fresh;
        } else {
            pcm_os_unmap(fresh, LEAF_ENTRIES * sizeof(pcm_word_t));
            leaf = expected; /* the winner's leaf */
        }
    }
    return (volatile pcm_word_t *)leaf + (chunk & (LEAF_ENTRIES - 1));
}

#endif

void *pcm_segment_map_find(const void *p)
{
    volatile pcm_word_t *entry = entry_of((uintptr_t)p >> PCM_SEGMENT_SHIFT, false);
    return entry ? (void *)pcm_load_acquire(entry) : NULL;
}

bool pcm_segment_map_prepare(const void *base, size_t bytes)
{
    uintptr_t first = (uintptr_t)base >> PCM_SEGMENT_SHIFT;
    uintptr_t last = ((uintptr_t)base + bytes - 1) >> PCM_SEGMENT_SHIFT;
    for (uintptr_t chunk = first; chunk <= last; chunk++)
        if (!entry_of(chunk, true))
            return false;
    return true;
}

bool pcm_segment_map_set(void *base, size_t bytes, void *owner)
{
    uintptr_t first = (uintptr_t)base >> PCM_SEGMENT_SHIFT;
    uintptr_t last = ((uintptr_t)base + bytes - 1) >> PCM_SEGMENT_SHIFT;
    for (uintptr_t chunk = first; chunk <= last; chunk++) {
        volatile pcm_word_t *entry = entry_of(chunk, true);
        if (!entry) {
            if (chunk > first)
                pcm_segment_map_clear(base, (chunk - first) << PCM_SEGMENT_SHIFT);
            return false;
        }
        /* release: the owner's header is written before it can be found */
        pcm_store_release(entry, (pcm_word_t)owner);
    }
    return true;
}

void pcm_segment_map_clear(void *base, size_t bytes)
{
    uintptr_t first = (uintptr_t)base >> PCM_SEGMENT_SHIFT;
    uintptr_t last = ((uintptr_t)base + bytes - 1) >> PCM_SEGMENT_SHIFT;
    for (uintptr_t chunk = first; chunk <= last; chunk++) {
        volatile pcm_word_t *entry = entry_of(chunk, false);
        if (entry)
            pcm_store_release(entry, 0);
    }
}
