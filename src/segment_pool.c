/*
 * segment_pool.c - the pool of unused segment chunks (segment_pool.h).
 * Its state is the index bytes of its chunks and the range they lie in,
 * all under one lock.  No malloc.
 *
 * Invariants (under pool_lock): a chunk's index byte is PCM_INDEX_POOL
 * iff the chunk is in the pool, and every index byte is written under the
 * lock (so the scans, which read all bytes in their range, race with no
 * writer); pool_chunks counts those bytes, and all
 * of them lie in [pool_low, pool_high); a pooled chunk is mapped, reads
 * as zeroes and has no map entry.  A chunk leaves the pool (its byte
 * NONE) before its taker writes to it, and enters it after its last user
 * is done with it, so no chunk has two users.  No lock-free step here:
 * nothing to go wrong by ABA.  Readers of index bytes outside the lock
 * (free's fast path) are the segment index's (segment_map.h).
 */
#include "segment_pool.h"

#include <stdint.h>
#include <string.h>

#include "atomic.h"
#include "fast_path.h"
#include "layout.h"
#include "os.h"
#include "segment_map.h"
#include "stats.h"
#include "yield_lock.h"

static volatile pcm_word_t pool_lock;
/* Under pool_lock: how many chunks are pooled, and the range of chunk
 * numbers [low, high) they all lie in (empty when count is 0). */
static size_t pool_chunks;
static uintptr_t pool_low, pool_high;
/* pool_chunks, for readers without the lock (statistics). */
static volatile pcm_word_t pool_count_seen;

bool pcm_segment_pool_enabled(void)
{
#ifdef PCM_HARDENED
    return false;
#else
    return pcm_segment_index_ready();
#endif
}

void pcm_segment_pool_lock(void)
{
    pcm_yield_lock_take(&pool_lock);
}

void pcm_segment_pool_unlock(void)
{
    pcm_yield_lock_give(&pool_lock);
}

static enum pcm_index_kind chunk_kind(uintptr_t chunk)
{
    return pcm_segment_index_kind((const void *)(chunk << PCM_SEGMENT_SHIFT));
}

bool pcm_segment_pool_unmaps(void)
{
    return pcm_segment_pool_enabled() && pcm_fast_path_is_rseq_after_start();
}

bool pcm_segment_pool_give_back(void *base, size_t chunks)
{
    size_t bytes = chunks << PCM_SEGMENT_SHIFT;
    /* Decommitted first, in the OS layer's pieces: the unmap is then one
     * call that frees no resident page, and fails as a whole or not at
     * all (os.h).  Refused, the chunks are pooled already zeroed. */
    bool zeroed = pcm_os_decommit(base, bytes);
    if (zeroed && pcm_segment_pool_unmaps()) {
        pcm_segment_pool_lock();
        pcm_segment_index_set(base, chunks, PCM_INDEX_NONE);
        pcm_segment_pool_unlock();
        if (pcm_os_unmap_whole(base, bytes))
            return true;
    }
    pcm_segment_pool_put(base, chunks, zeroed);
    return false;
}

void pcm_segment_pool_put(void *base, size_t chunks, bool zeroed)
{
    size_t bytes = chunks << PCM_SEGMENT_SHIFT;
    if (!zeroed && !pcm_os_decommit(base, bytes))
        memset(base, 0, bytes);
    uintptr_t first = (uintptr_t)base >> PCM_SEGMENT_SHIFT;
    pcm_segment_pool_lock();
    pcm_segment_index_set(base, chunks, PCM_INDEX_POOL);
    if (!pool_chunks || first < pool_low)
        pool_low = first;
    if (!pool_chunks || first + chunks > pool_high)
        pool_high = first + chunks;
    pool_chunks += chunks;
    pcm_store_relaxed(&pool_count_seen, pool_chunks);
    pcm_segment_pool_unlock();
}

/* Under the lock: the run of `taken` pooled chunks from chunk `first` is
 * no longer the pool's. */
static void run_taken(uintptr_t first, size_t taken)
{
    pcm_segment_index_set((void *)(first << PCM_SEGMENT_SHIFT), taken, PCM_INDEX_NONE);
    pool_chunks -= taken;
    pcm_store_relaxed(&pool_count_seen, pool_chunks);
    while (pool_chunks && chunk_kind(pool_low) != PCM_INDEX_POOL) /* keep the scan short */
        pool_low++;
}

/* Under the lock: the shortest run of pooled chunks that holds `chunks`
 * (best fit: a segment's one chunk does not cut the long run a large
 * object may need later), else the longest; its length, its first chunk
 * in *first. */
static size_t best_run(size_t chunks, uintptr_t *first)
{
    size_t fit = 0, longest = 0;
    uintptr_t fit_first = 0, longest_first = 0;
    for (uintptr_t chunk = pool_low; chunk <= pool_high; chunk++) {
        size_t run = 0;
        while (chunk < pool_high && chunk_kind(chunk) == PCM_INDEX_POOL) {
            run++;
            chunk++;
        }
        if (!run)
            continue;
        if (run >= chunks && (!fit || run < fit)) {
            fit = run;
            fit_first = chunk - run;
            if (run == chunks)
                break;
        }
        if (run > longest) {
            longest = run;
            longest_first = chunk - run;
        }
    }
    *first = fit ? fit_first : longest_first;
    return fit ? fit : longest;
}

void *pcm_segment_pool_take(size_t chunks)
{
    if (!chunks || !pcm_load_relaxed(&pool_count_seen))
        return NULL;
    void *found = NULL;
    pcm_segment_pool_lock();
    /* The shortest run long enough; else the longest, joined by free
     * address space beside it, mapped afresh: where segments filled the
     * space up to a mapping that is gone now, the run alone falls short
     * of a block the address space could hold. */
    uintptr_t first = 0;
    size_t run = pool_chunks ? best_run(chunks, &first) : 0;
    if (run >= chunks) {
        found = (void *)(first << PCM_SEGMENT_SHIFT);
        run = chunks; /* the rest of the run stays pooled */
    } else if (run) {
        size_t missing = chunks - run;
        uintptr_t below = first - missing, above = first + run;
        if (first > missing && pcm_os_map_at((void *)(below << PCM_SEGMENT_SHIFT), missing << PCM_SEGMENT_SHIFT))
            found = (void *)(below << PCM_SEGMENT_SHIFT);
        else if (above + missing > above && above + missing <= (UINTPTR_MAX >> PCM_SEGMENT_SHIFT) &&
                 pcm_os_map_at((void *)(above << PCM_SEGMENT_SHIFT), missing << PCM_SEGMENT_SHIFT))
            found = (void *)(first << PCM_SEGMENT_SHIFT);
    }
    if (found && run < chunks)
        pcm_stats_pool_mapped((chunks - run) << PCM_SEGMENT_SHIFT);
    if (found)
        run_taken(first, run);
    pcm_segment_pool_unlock();
    return found;
}

void pcm_segment_pool_index_add(void *base)
{
    pcm_segment_pool_lock();
    pcm_segment_index_add(base);
    pcm_segment_pool_unlock();
}

size_t pcm_segment_pool_count(void)
{
    return pcm_load_relaxed(&pool_count_seen);
}
