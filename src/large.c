/*
 * large.c - large objects on their own mappings (large.h); freed ones go
 * to the cache of large_cache.c.  Lock-free.  No malloc.
 */
#include "large.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "decay.h"
#include "init.h"
#include "large_cache.h"
#include "layout.h"
#include "misuse.h"
#include "os.h"
#include "segment.h"
#include "segment_map.h"
#include "segment_pool.h"
#include "stats.h"

static size_t object_offset(size_t alignment)
{
    return alignment > PCM_PAGE_SIZE ? alignment : PCM_PAGE_SIZE;
}

/* Pooled chunks back to the pool: out of the map, then decommitted. */
static void return_to_pool(struct pcm_large *large)
{
    size_t bytes = large->map_bytes;
    pcm_segment_map_clear(large, bytes);
    pcm_stats_large_returned(bytes);
    pcm_segment_pool_put(large, bytes >> PCM_SEGMENT_SHIFT, false);
}

/* When the OS has no address space for a mapping of map_bytes: a run of
 * pooled chunks (aligned to a chunk: any alignment a large object may
 * have up to that), or NULL. */
static struct pcm_large *adopt_pooled(size_t map_bytes, size_t alignment)
{
    if (alignment > PCM_SEGMENT_SIZE || map_bytes > SIZE_MAX - PCM_SEGMENT_SIZE)
        return NULL;
    size_t bytes = PCM_ALIGN_UP(map_bytes, PCM_SEGMENT_SIZE);
    struct pcm_large *large = pcm_segment_pool_take(bytes >> PCM_SEGMENT_SHIFT);
    if (!large)
        return NULL;
    large->kind = PCM_KIND_LARGE;
    large->map_bytes = bytes;
    large->pooled = true;
    if (!pcm_segment_map_set(large, bytes, large)) {
        pcm_segment_pool_put(large, bytes >> PCM_SEGMENT_SHIFT, false);
        return NULL;
    }
    pcm_stats_large_adopted(bytes);
    return large;
}

void pcm_large_unmap(struct pcm_large *large)
{
    if (large->pooled) {
        return_to_pool(large);
        return;
    }
    size_t bytes = large->map_bytes;
    pcm_segment_map_clear(large, bytes);
    pcm_os_unmap(large, bytes);
    pcm_stats_large_destroyed(bytes);
}

/* A fresh mapping's alignment: a granule (layout.h), or a huge page for
 * one of 2 MiB or more under PCMALLOC_HUGEPAGES=1, where a 32-bit granule
 * is less: the kernel backs only whole aligned huge pages. */
static size_t fresh_alignment(size_t map_bytes)
{
    if (PCM_HUGE_PAGE_SIZE > PCM_MAP_GRANULE && pcm_opts.hugepages && map_bytes >= PCM_HUGE_PAGE_SIZE)
        return PCM_HUGE_PAGE_SIZE;
    return PCM_MAP_GRANULE;
}

/* The object of a mapping now in use, `size` bytes asked for. */
static void *hand_out(struct pcm_large *large, size_t offset, size_t size)
{
    large->object = (char *)large + offset;
    large->requested = size;
    return large->object;
}

/* Grow the mapping to new_bytes without copying: in place if the pages
 * above are free, else onto a fresh granule-aligned range (reserved first,
 * then mremap'd onto).  The segment map's leaves for the new range exist
 * before the object is handed back, so registering it cannot fail. */
static struct pcm_large *grow_mapping(struct pcm_large *large, size_t new_bytes)
{
    size_t old_bytes = large->map_bytes;
    /* The kernel says first whether the address space is there; only then
     * does the map get leaves for it (an absurd size must cost nothing). */
    if (pcm_os_remap_in_place(large, old_bytes, new_bytes)) {
        if (pcm_segment_map_prepare(large, new_bytes))
            return large;
        pcm_os_remap_in_place(large, new_bytes, old_bytes); /* shrinking in place cannot fail */
    }
    struct pcm_large *target = pcm_os_map_aligned(new_bytes, fresh_alignment(new_bytes));
    if (!target)
        return NULL;
    if (!pcm_segment_map_prepare(target, new_bytes)) {
        pcm_os_unmap(target, new_bytes);
        return NULL;
    }
    /* Out of the map before the move frees the old range: from then on
     * another thread may map there and register its own owner, which a
     * later clear would erase (its free would abort). */
    pcm_segment_map_clear(large, old_bytes);
    if (!pcm_os_remap_fixed(large, old_bytes, new_bytes, target)) {
        pcm_segment_map_set(large, old_bytes, large); /* its leaves exist: cannot fail */
        pcm_os_unmap(target, new_bytes);
        return NULL;
    }
    return target;
}

/* Grow large's mapping to new_bytes (grow_mapping), registered whole in
 * the segment map; NULL, the mapping unchanged, if it cannot. */
static struct pcm_large *grow_to(struct pcm_large *large, size_t new_bytes)
{
    size_t old_bytes = large->map_bytes;
    struct pcm_large *moved = grow_mapping(large, new_bytes);
    if (!moved)
        return NULL;
    /* mremap keeps the mapping's advice: give it once, on crossing. */
    if (pcm_opts.hugepages && new_bytes >= PCM_HUGE_PAGE_SIZE && old_bytes < PCM_HUGE_PAGE_SIZE)
        pcm_os_hugepage(moved, new_bytes);
    moved->map_bytes = new_bytes;
    pcm_segment_map_set(moved, new_bytes, moved); /* leaves prepared: cannot fail */
    pcm_stats_large_resized(old_bytes, new_bytes);
    return moved;
}

void *pcm_large_alloc(size_t size, size_t alignment, bool zeroed)
{
    pcm_ensure_init(); /* it may be the process's first allocation */
    /* A success leaves errno as the caller had it, though a growth in
     * place or an mmap on the way may have failed and set it. */
    int saved_errno = errno;
    /* A program that only makes large allocations must see its cache
     * (and free pages) decay too. */
    pcm_decay_maybe();
    size_t offset = object_offset(alignment);
    /* Like glibc, no object larger than PTRDIFF_MAX: pointer differences
     * within it must fit a ptrdiff_t. */
    if (size > PTRDIFF_MAX - offset - PCM_SEGMENT_SIZE) {
        errno = ENOMEM;
        return NULL;
    }
    /* At least one byte: the object must lie inside its mapping. */
    size_t map_bytes = PCM_ALIGN_UP(offset + (size ? size : 1), PCM_PAGE_SIZE);
    /* The object sits `offset` (= its alignment, when above a page) into a
     * mapping aligned to at least that much. Cached mappings are only
     * granule-aligned. */
    bool over_aligned = alignment > PCM_MAP_GRANULE;
    struct pcm_large *large = over_aligned ? NULL : pcm_large_cache_take_nearest(map_bytes);
    if (large) {
        size_t old_bytes = large->map_bytes;
        if (old_bytes < map_bytes) { /* a smaller one, grown (or a fresh one below) */
            struct pcm_large *grown = grow_to(large, map_bytes);
            if (!grown)
                pcm_large_unmap(large);
            large = grown;
        }
        /* calloc promises zeros for the size asked, no more; only the part
         * the mapping had before it grew may hold a last user's bytes. */
        size_t dirty = old_bytes > offset ? old_bytes - offset : 0;
        if (large && zeroed)
            memset((char *)large + offset, 0, dirty < size ? dirty : size);
    }
    if (!large) {
        large = pcm_os_map_aligned(map_bytes, over_aligned ? alignment : fresh_alignment(map_bytes));
        if (!large && errno == ENOMEM && (large = adopt_pooled(map_bytes, alignment)) != NULL) {
            errno = saved_errno; /* a success: the failed mmap's errno is not the caller's */
            return hand_out(large, offset, size); /* zeroes: its pages were decommitted */
        }
        if (!large)
            return NULL;
        if (pcm_opts.hugepages && map_bytes >= PCM_HUGE_PAGE_SIZE)
            pcm_os_hugepage(large, map_bytes); /* before the header's write */
        large->kind = PCM_KIND_LARGE;
        large->map_bytes = map_bytes;
        if (!pcm_segment_map_set(large, map_bytes, large)) {
            pcm_os_unmap(large, map_bytes);
            errno = ENOMEM;
            return NULL;
        }
        pcm_stats_large_created(map_bytes);
    }
    errno = saved_errno;
    return hand_out(large, offset, size);
}

void *pcm_large_alloc_cached(size_t size, size_t most_bytes)
{
    size_t offset = object_offset(0);
    struct pcm_large *large = pcm_large_cache_take(PCM_ALIGN_UP(offset + size, PCM_PAGE_SIZE), most_bytes);
    return large ? hand_out(large, offset, size) : NULL;
}

size_t pcm_large_usable(const struct pcm_large *large)
{
    return large->map_bytes - (size_t)((const char *)large->object - (const char *)large);
}

void pcm_large_check(struct pcm_large *large, void *p, const char *call)
{
    if (large->object == p)
        return;
    if (large->object == NULL && p == (char *)large + PCM_PAGE_SIZE)
        pcm_misuse_double_free(call, p);
    pcm_misuse_invalid_pointer(call, p);
}

void pcm_large_free(struct pcm_large *large, void *p, const char *call)
{
    pcm_large_check(large, p, call);
    pcm_decay_maybe(); /* before the put: this mapping is not idle */
    large->object = NULL;
    if (large->pooled || !pcm_large_cache_put(large))
        pcm_large_unmap(large);
}

/* Give back the tail beyond `need` bytes, with the granules it covered. */
static void shrink_mapping(struct pcm_large *large, size_t need)
{
    size_t old_bytes = large->map_bytes;
    size_t kept_granules = PCM_ALIGN_UP(need, PCM_MAP_GRANULE);
    if (old_bytes > kept_granules)
        pcm_segment_map_clear((char *)large + kept_granules, old_bytes - kept_granules);
    pcm_os_unmap((char *)large + need, old_bytes - need);
    large->map_bytes = need;
    pcm_stats_large_resized(old_bytes, need);
}

/* realloc where the mapping cannot grow (no address space above it or
 * to move it to, or pooled chunks): a new object (the pool may give its
 * chunks), the contents copied, the old one freed. */
static void *move_elsewhere(struct pcm_large *large, void *p, size_t size, int saved_errno)
{
    void *fresh = pcm_large_alloc(size, 0, false);
    if (!fresh) {
        errno = ENOMEM;
        return NULL; /* p stays as it was */
    }
    size_t old_usable = pcm_large_usable(large);
    memcpy(fresh, p, old_usable < size ? old_usable : size);
    pcm_large_free(large, p, "realloc");
    errno = saved_errno; /* a success: the failed growth's errno is not the caller's */
    return fresh;
}

void *pcm_large_realloc(struct pcm_large *large, void *p, size_t size)
{
    pcm_large_check(large, p, "realloc");
    size_t offset = (size_t)((char *)p - (char *)large);
    if (size > PTRDIFF_MAX - offset - PCM_SEGMENT_SIZE) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = PCM_ALIGN_UP(offset + size, PCM_PAGE_SIZE);
    size_t old_bytes = large->map_bytes;
    if (need <= old_bytes) {
        /* A real shrink, by more than half, gives the tail back; growth
         * into a mapping that is already large enough (reused from the
         * cache, or grown with headroom) keeps it. */
        if (size < large->requested / 2 && need < old_bytes / 2 && !large->pooled)
            shrink_mapping(large, need);
        large->requested = size;
        return p;
    }
    int saved_errno = errno;
    /* Grow by at least a quarter: repeated small growth stays amortised. */
    size_t grown = PCM_ALIGN_UP(old_bytes + old_bytes / 4, PCM_PAGE_SIZE);
    size_t new_bytes = need > grown ? need : grown;
    struct pcm_large *moved = large->pooled ? NULL : grow_to(large, new_bytes);
    if (!moved && new_bytes > need && !large->pooled)
        moved = grow_to(large, need);
    if (!moved)
        return move_elsewhere(large, p, size, saved_errno);
    errno = saved_errno; /* a growth in place or at new_bytes may have failed on the way */
    moved->object = (char *)moved + offset;
    moved->requested = size;
    return moved->object;
}
