/*
 * segment_map.c - changing the granule -> owner map (segment_map.h, where
 * its shape and the lookup are).  No locks; no malloc.
 */
#include "segment_map.h"

#include "atomic.h"
#include "fast_path.h"
#include "layout.h"
#include "os.h"

volatile pcm_word_t pcm_segment_map_top[(size_t)1 << PCM_MAP_TOP_BITS];

#if PCM_MAP_LEAF_BITS == 0

uint8_t pcm_segment_index[PCM_INDEX_CHUNKS];

void pcm_segment_index_init(void)
{
}

#else

uint8_t *pcm_segment_index;
uintptr_t pcm_segment_index_chunks;

#define INDEX_CHUNKS ((uintptr_t)1 << (PCM_MAP_ADDRESS_BITS - PCM_SEGMENT_SHIFT))

void pcm_segment_index_init(void)
{
    void *index = pcm_os_map_sparse(INDEX_CHUNKS);
    if (!index)
        return;
    pcm_segment_index = index;
    pcm_segment_index_chunks = INDEX_CHUNKS;
}

#endif

void pcm_segment_index_add(void *base)
{
    uintptr_t chunk = (uintptr_t)base >> PCM_SEGMENT_SHIFT;
#if PCM_MAP_LEAF_BITS != 0
    if (chunk >= pcm_segment_index_chunks)
        return;
#endif
    pcm_segment_index[chunk] = pcm_fast_path_is_rseq_after_start() ? PCM_INDEX_RSEQ : PCM_INDEX_CAS;
}

void pcm_segment_index_set(void *base, size_t chunks, enum pcm_index_kind kind)
{
    uintptr_t first = (uintptr_t)base >> PCM_SEGMENT_SHIFT;
    for (uintptr_t chunk = first; chunk < first + chunks; chunk++) {
#if PCM_MAP_LEAF_BITS != 0
        if (chunk >= pcm_segment_index_chunks)
            return;
#endif
        pcm_segment_index[chunk] = (uint8_t)kind;
    }
}

bool pcm_segment_index_ready(void)
{
#if PCM_MAP_LEAF_BITS != 0
    return pcm_segment_index_chunks != 0;
#else
    return true;
#endif
}

#if PCM_MAP_LEAF_BITS == 0

static volatile pcm_word_t *entry_of(uintptr_t granule, bool create)
{
    (void)create;
    return &pcm_segment_map_top[granule];
}

#else

#define LEAF_ENTRIES ((size_t)1 << PCM_MAP_LEAF_BITS)

/* The entry of a granule, its leaf mapped first if `create`.  A leaf is
 * installed by CAS: the loser of a race unmaps its own and uses the
 * winner's. */
static volatile pcm_word_t *entry_of(uintptr_t granule, bool create)
{
    uintptr_t top = granule >> PCM_MAP_LEAF_BITS;
    if (top >= ((uintptr_t)1 << PCM_MAP_TOP_BITS))
        return NULL;
    /* acquire: a leaf's zeroed contents are visible before we index it */
    pcm_word_t leaf = pcm_load_acquire(&pcm_segment_map_top[top]);
    if (!leaf) {
        if (!create)
            return NULL;
        void *fresh = pcm_os_map(LEAF_ENTRIES * sizeof(pcm_word_t));
        if (!fresh)
            return NULL;
        pcm_word_t expected = 0;
        if (pcm_cas_acq_rel(&pcm_segment_map_top[top], &expected, (pcm_word_t)fresh)) {
            leaf = (pcm_word_t)fresh;
        } else {
            pcm_os_unmap(fresh, LEAF_ENTRIES * sizeof(pcm_word_t));
            leaf = expected; /* the winner's leaf */
        }
    }
    return (volatile pcm_word_t *)leaf + (granule & (LEAF_ENTRIES - 1));
}

#endif

bool pcm_segment_map_prepare(const void *base, size_t bytes)
{
    uintptr_t first = (uintptr_t)base >> PCM_MAP_SHIFT;
    uintptr_t last = ((uintptr_t)base + bytes - 1) >> PCM_MAP_SHIFT;
    for (uintptr_t granule = first; granule <= last; granule++)
        if (!entry_of(granule, true))
            return false;
    return true;
}

bool pcm_segment_map_set(void *base, size_t bytes, void *owner)
{
    uintptr_t first = (uintptr_t)base >> PCM_MAP_SHIFT;
    uintptr_t last = ((uintptr_t)base + bytes - 1) >> PCM_MAP_SHIFT;
    for (uintptr_t granule = first; granule <= last; granule++) {
        volatile pcm_word_t *entry = entry_of(granule, true);
        if (!entry) {
            if (granule > first)
                pcm_segment_map_clear(base, (granule - first) << PCM_MAP_SHIFT);
            return false;
        }
        /* release: the owner's header is written before it can be found */
        pcm_store_release(entry, (pcm_word_t)owner);
    }
    return true;
}

void pcm_segment_map_clear(void *base, size_t bytes)
{
    uintptr_t first = (uintptr_t)base >> PCM_MAP_SHIFT;
    uintptr_t last = ((uintptr_t)base + bytes - 1) >> PCM_MAP_SHIFT;
    for (uintptr_t granule = first; granule <= last; granule++) {
        volatile pcm_word_t *entry = entry_of(granule, false);
        if (entry)
            pcm_store_release(entry, 0);
    }
}
