/*
 * segment_map.h - from any address to the pcmalloc metadata that owns its
 * segment-sized chunk of the address space, in O(1) and without a lock.
 *
 * An entry is the address of a segment header or of a large object's
 * header (both start with a pcm_word_t kind), or 0 for chunks pcmalloc does
 * not own - which is how free() recognises a pointer it never returned.
 * Entries are published with a release store after the header is written,
 * and read with an acquire load, so a reader that finds an entry sees an
 * initialised header.
 */
#ifndef PCM_SEGMENT_MAP_H
#define PCM_SEGMENT_MAP_H

#include <stdbool.h>
#include <stddef.h>

/* The owner of the chunk holding p, or NULL. */
void *pcm_segment_map_find(const void *p);

/* Make sure the map has memory for every chunk of [base, base + bytes);
 * false if the map's own memory could not be mapped. */
bool pcm_segment_map_prepare(const void *base, size_t bytes);

/* Make every chunk of [base, base + bytes) point at owner (base is chunk
 * aligned).  False if the map's own memory could not be mapped; never
 * after a successful pcm_segment_map_prepare of the same range. */
bool pcm_segment_map_set(void *base, size_t bytes, void *owner);

/* Forget the chunks of [base, base + bytes). */
void pcm_segment_map_clear(void *base, size_t bytes);

#endif
