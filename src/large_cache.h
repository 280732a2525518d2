/*
 * large_cache.h - freed large mappings kept for reuse, so a program that
 * allocates and frees big buffers in a loop does not pay an mmap, a
 * munmap and fresh page faults each time.
 *
 * Bounded in bytes: PCMALLOC_LARGE_CACHE MiB (default 64) in all, a
 * quarter of that for one mapping, and PCM_LARGE_CACHE_SLOTS mappings.
 * Decayed: a mapping no one took for one to two periods of its own
 * delay (PCMALLOC_LARGE_CACHE_DELAY, or PCMALLOC_PURGE_DELAY if that is
 * shorter) is unmapped by the large cache's tick (decay.c).
 * malloc_trim(0) unmaps them all at once.
 *
 * Lock-free; the invariants and the ABA argument are in large_cache.c.
 * No malloc, no locks.
 */
#ifndef PCM_LARGE_CACHE_H
#define PCM_LARGE_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "atomic.h"

#define PCM_LARGE_CACHE_SLOTS 32u

struct pcm_large;

/* The smallest cached mapping of at least map_bytes and at most
 * most_bytes, taken out of the cache (the caller owns it and its header),
 * or NULL. */
struct pcm_large *pcm_large_cache_take(size_t map_bytes, size_t most_bytes);
/* The smallest cached mapping of at least map_bytes, else the largest
 * smaller one (the caller grows it: its resident pages serve as far as
 * they go), taken out of the cache; NULL if the cache is empty.  Without
 * the second choice a cache of mappings of assorted sizes fills up with
 * the ones too small for the next request while fresh mappings are made
 * beside them (mixed sizes: peak RSS 68 MB, with it 42 MB).
 * A mapping is handed out whole, its unused tail included: moving tails
 * off and filling grown mappings with other cached pages by mremap cost
 * sixty times the system calls for no lower peak (README, Limitations).
 * Decommitting the tail beyond twice the request as the mapping is taken
 * lowered mixed sizes' peak RSS at one thread only from 39,652 to 38,872
 * KiB, at a quarter of the speed (6.3 -> 1.5 M ops/s, medians of 5): the
 * pages a later, larger request faults in again cost more. */
struct pcm_large *pcm_large_cache_take_nearest(size_t map_bytes);
/* Keep a freed mapping (granule-aligned, header's map_bytes set); false
 * if the cache has no room for it under its bounds: then the caller
 * unmaps it. */
bool pcm_large_cache_put(struct pcm_large *large);
/* Unmap every cached mapping; true if there was any. */
bool pcm_large_cache_trim(void);
/* A decay tick: unmap the mappings that sat in the cache since before
 * the previous tick (all: every one put before this tick).  The bytes
 * unmapped. */
size_t pcm_large_cache_decay(bool all);

/* The bound in bytes, from PCMALLOC_LARGE_CACHE. */
size_t pcm_large_cache_limit(void);
/* Bytes and mappings in the cache now (for statistics and tests: exact
 * when no put or take is in flight, otherwise possibly a put's size over,
 * never over the bound). */
size_t pcm_large_cache_bytes(void);
unsigned pcm_large_cache_count(void);

#endif
