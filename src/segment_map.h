/*
 * segment_map.h - from any address to the pcmalloc metadata that owns its
 * granule of the address space (PCM_MAP_GRANULE, layout.h: a segment's 4
 * MiB on 64-bit, 64 KiB on 32-bit), in O(1) and without a lock.
 *
 * An entry is the address of a segment header or of a large object's
 * header (both start with a pcm_word_t kind), or 0 for granules pcmalloc
 * does not own - which is how free() recognises a pointer it never
 * returned.  A segment sets the entries of all its granules; so does a
 * large mapping, which starts on a granule and may end inside its last
 * one.  No object lies in the rest of that granule (objects are in
 * segments and large mappings, which start on granules), so a pointer
 * there fails the large object's check: an invalid pointer.
 * Entries are published with a release store after the header is written,
 * and read with an acquire load, so a reader that finds an entry sees an
 * initialised header.
 */
#ifndef PCM_SEGMENT_MAP_H
#define PCM_SEGMENT_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "layout.h"

/*
 * The map itself.  32-bit: 2^(32-16) = 65536 granules, one static array
 * (256 KiB of bss, its pages written only where pcmalloc maps).
 * 64-bit: user addresses below 2^48 give 2^26 granules; a static top level of
 * 2^13 pointers to leaves of 2^13 entries, each leaf mapped on first use
 * (64 KiB; 512 MiB of address space per leaf) and never freed, so a reader
 * never sees one disappear.
 */
#if UINTPTR_MAX == 0xffffffffu
#define PCM_MAP_LEAF_BITS 0u
#define PCM_MAP_TOP_BITS (32u - PCM_MAP_SHIFT)
#else
#define PCM_MAP_ADDRESS_BITS 48u
#define PCM_MAP_LEAF_BITS 13u
#define PCM_MAP_TOP_BITS (PCM_MAP_ADDRESS_BITS - PCM_MAP_SHIFT - PCM_MAP_LEAF_BITS)
#endif

/* 32-bit: the entries themselves; 64-bit: pointers to leaves. */
extern volatile pcm_word_t pcm_segment_map_top[(size_t)1 << PCM_MAP_TOP_BITS]
    __attribute__((visibility("hidden")));

/* The owner of the granule holding p, or NULL: the free path's first
 * step where the segment index below does not know p. */
static inline void *pcm_segment_map_find(const void *p)
{
    uintptr_t granule = (uintptr_t)p >> PCM_MAP_SHIFT;
#if PCM_MAP_LEAF_BITS == 0
    return (void *)pcm_load_acquire(&pcm_segment_map_top[granule]);
#else
    uintptr_t top = granule >> PCM_MAP_LEAF_BITS;
    if (__builtin_expect(top >= ((uintptr_t)1 << PCM_MAP_TOP_BITS), 0))
        return NULL; /* above 2^48: never one of ours (we never map there) */
    /* acquire: a leaf's zeroed contents are visible before we index it */
    const volatile pcm_word_t *leaf = (const volatile pcm_word_t *)pcm_load_acquire(&pcm_segment_map_top[top]);
    if (!leaf)
        return NULL;
    return (void *)pcm_load_acquire(&leaf[granule & (((uintptr_t)1 << PCM_MAP_LEAF_BITS) - 1)]);
#endif
}

/*
 * The segment index: the free path's shortcut past the map above.  One
 * byte per chunk (PCM_SEGMENT_SIZE of address space, a granule on
 * 64-bit), non-zero where a segment of small-object spans starts
 * (segments are chunk-sized and chunk-aligned), so a small object's
 * segment is found with one load and no pointer to follow.  A byte is set
 * when its segment is created; a segment no heap uses any more goes to the
 * pool (segment_pool.h), its byte POOL, and on to a new segment or a large
 * object (its byte NONE); on the rseq path it is unmapped instead (its
 * byte NONE before the unmap).
 * Its value also names the fast path (fast_path.h), settled
 * before the first segment is made: the free path's one compare of the
 * byte is then its test of the path too (kind RSEQ), with no load of the
 * path's variable.  A byte that changes after its segment was created
 * (POOL, NONE) changes when none of the segment's objects is live: only
 * an invalid pointer can see it change, and every value sends one to an
 * error (POOL: the chunk's header reads as zeroes - no span - and its map
 * entries are cleared).
 *
 * Plain loads and stores, no atomics: a segment's byte is written before
 * any object of it is handed out, and whoever frees a valid object got it
 * from that allocation through the heap locks and caches (release/acquire
 * chains), so it sees the byte.  An invalid pointer that races with a
 * segment's creation may read 0: it then takes the slow way through the
 * full map, which gives the same verdict.  A 0 is never wrong, only slow.
 *
 * Chunk 0 never holds a segment (nothing is mapped at address 0), so
 * NULL is never found: free(NULL) takes the slow way, with no test of its
 * own on the fast path.
 *
 * 32-bit: a static array of 1024 bytes.  64-bit: 2^26 bytes (one per chunk
 * below 2^48) mapped at start-up, its pages committed only where segments
 * are; until then, or if that mapping failed, pcm_segment_index_chunks is
 * 0 and every free goes the slow way.
 */
#if PCM_MAP_LEAF_BITS == 0
#define PCM_INDEX_CHUNKS ((size_t)1 << (32u - PCM_SEGMENT_SHIFT))
extern uint8_t pcm_segment_index[PCM_INDEX_CHUNKS] __attribute__((visibility("hidden")));
#else
extern uint8_t *pcm_segment_index __attribute__((visibility("hidden")));
extern uintptr_t pcm_segment_index_chunks __attribute__((visibility("hidden")));
#endif

/* A chunk's byte in the index. */
enum pcm_index_kind {
    PCM_INDEX_NONE = 0, /* no segment known there */
    PCM_INDEX_CAS,      /* a segment, in a process on the CAS fast path */
    PCM_INDEX_RSEQ,     /* a segment, in a process on the rseq fast path */
    PCM_INDEX_POOL,     /* a chunk in the segment pool: no segment, no object */
};

/* What the index knows of p's chunk.  (If NONE, p may still be
 * pcmalloc's: look in the full map.)  For a segment, the segment is the
 * chunk's start (segment.h: pcm_segment_of). */
static inline enum pcm_index_kind pcm_segment_index_kind(const void *p)
{
    uintptr_t chunk = (uintptr_t)p >> PCM_SEGMENT_SHIFT;
#if PCM_MAP_LEAF_BITS != 0
    if (__builtin_expect(chunk >= pcm_segment_index_chunks, 0))
        return PCM_INDEX_NONE;
#endif
    return (enum pcm_index_kind)pcm_segment_index[chunk];
}

static inline bool pcm_segment_index_has(const void *p)
{
    enum pcm_index_kind kind = pcm_segment_index_kind(p);
    return kind == PCM_INDEX_CAS || kind == PCM_INDEX_RSEQ;
}

/* Map the index (64-bit; start-up, single caller).  Never fails: without
 * it, frees take the slow way. */
void pcm_segment_index_init(void);

/* The segment at base (chunk-aligned) exists: let the index know.  After
 * start-up (pcm_fast_path_choose), as every segment is made. */
void pcm_segment_index_add(void *base);
/* Set the bytes of the chunks of [base, base + chunks chunks) to kind
 * (the segment pool's transitions: POOL, NONE). */
void pcm_segment_index_set(void *base, size_t chunks, enum pcm_index_kind kind);
/* Whether the index exists (64-bit: its mapping may have failed). */
bool pcm_segment_index_ready(void);

/* Make sure the map has memory for every granule of [base, base + bytes);
 * false if the map's own memory could not be mapped. */
bool pcm_segment_map_prepare(const void *base, size_t bytes);

/* Make every granule of [base, base + bytes) point at owner (base is
 * granule-aligned).  False if the map's own memory could not be mapped; never
 * after a successful pcm_segment_map_prepare of the same range. */
bool pcm_segment_map_set(void *base, size_t bytes, void *owner);

/* Forget the granules of [base, base + bytes) (base granule-aligned). */
void pcm_segment_map_clear(void *base, size_t bytes);

#endif
