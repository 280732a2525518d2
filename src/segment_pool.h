/*
 * segment_pool.h - chunks of address space (PCM_SEGMENT_SIZE, aligned) that
 * held a segment no heap uses any more, kept mapped for the next segment of
 * any heap or for a large object when the OS has no address space left -
 * or, on the rseq path, given back to the OS.
 *
 * Why not unmap them: on the CAS path (percpu_cache.h) a lock-free pop
 * that lost a race may still read a stale object of the segment
 * (segment.h), and that read must not fault.  On the rseq path no one
 * reads an object it does not own - a section's pop reads the top of its
 * own CPU's cache, and the kernel restarts it if anything else could have
 * run between; a push onto a remote stack reads the stack's depth hint,
 * not its top (remote.c) - so there an empty segment's chunk goes back to
 * the OS instead (pcm_segment_pool_give_back), and its address space
 * serves any mapping of the program; the pool then holds only what the
 * kernel refused to unmap.  A pooled chunk stays mapped, its pages decommitted
 * (they read as zeroes); one lent to a large object stays mapped as that
 * object's memory, and comes back here when the object is freed, never
 * unmapped.  So a 32-bit
 * process that freed a phase of small objects can still get a big block
 * (README, Limitations, before), and an idle CPU's empty segments serve
 * the CPU that grows.
 *
 * A pooled chunk's byte in the segment index is PCM_INDEX_POOL, which is
 * how the pool finds its chunks and runs of them; its map entries are
 * cleared.  One lock, on slow paths only (a segment made or given back, a
 * large object mapped from the pool); innermost: taken under a heap lock,
 * never the other way round.  No pooling without the index (64-bit: its
 * mapping failed) or in the hardened build (its guard pages would be a
 * large object's).
 */
#ifndef PCM_SEGMENT_POOL_H
#define PCM_SEGMENT_POOL_H

#include <stdbool.h>
#include <stddef.h>

/* Whether chunks can be pooled at all. */
bool pcm_segment_pool_enabled(void);
/* Whether empty segments' chunks go back to the OS (the rseq path; known
 * once a segment exists) rather than to the pool. */
bool pcm_segment_pool_unmaps(void);
/* The `chunks` chunks from base, no longer anyone's and out of the
 * segment map, back to the OS where pcm_segment_pool_unmaps (true: gone,
 * their index bytes NONE), else into the pool (false: not on this path,
 * or the kernel refused). */
bool pcm_segment_pool_give_back(void *base, size_t chunks);
/* Add the `chunks` chunks from base, no longer anyone's and out of the
 * segment map.  zeroed: their pages were decommitted already; otherwise
 * they are decommitted here (or, if the kernel refuses, cleared: the next
 * user counts on zeroes). */
void pcm_segment_pool_put(void *base, size_t chunks, bool zeroed);
/* Take a run of `chunks` consecutive pooled chunks (the lowest), their
 * index bytes NONE; NULL if the pool has no such run. */
void *pcm_segment_pool_take(size_t chunks);
/* A new segment's index byte (pcm_segment_index_add), written under the
 * pool's lock: the pool's scans read every byte of their range under it,
 * and a new segment may lie in that range. */
void pcm_segment_pool_index_add(void *base);
/* Chunks in the pool now. */
size_t pcm_segment_pool_count(void);
/* For fork (heap.c: pcm_heaps_lock_all): hold the pool's lock across it. */
void pcm_segment_pool_lock(void);
void pcm_segment_pool_unlock(void);

#endif
