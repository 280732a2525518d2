/*
 * large.c - large objects on their own mappings, and the cache of freed
 * mappings (large.h).  Lock-free: the cache is an array of slots, each
 * taken with one CAS.  No malloc.
 */
#include "large.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "init.h"
#include "layout.h"
#include "misuse.h"
#include "os.h"
#include "segment.h"
#include "segment_map.h"
#include "stats.h"

#define CACHE_SLOTS 16u
#define CACHE_BYTES_MAX ((size_t)64 << 20)
/* How often a taker retries when the best-fitting slot was taken under it
 * before giving up and mapping afresh. */
#define CACHE_TAKE_TRIES 4u

/* Slot invariant: 0, or a header whose mapping is unused and whose
 * `object` is NULL; while a header sits in a slot nothing changes it.  A
 * slot is filled by CAS from 0 and emptied by CAS from the header it
 * holds; a header is in at most one slot.  ABA: a taker's CAS from header
 * H succeeds only if H is in the slot now; if H left and came back in
 * between (perhaps resized by a realloc while it was out), the taker reads
 * its size again after the CAS, from the header it now owns. */
static volatile pcm_word_t cache_slot[CACHE_SLOTS];
static volatile pcm_word_t cache_bytes;

static size_t object_offset(size_t alignment)
{
    return alignment > PCM_PAGE_SIZE ? alignment : PCM_PAGE_SIZE;
}

static void unmap_large(struct pcm_large *large)
{
    size_t bytes = large->map_bytes;
    pcm_segment_map_clear(large, bytes);
    pcm_os_unmap(large, bytes);
    pcm_stats_large_destroyed(bytes);
}

/* The smallest cached mapping that holds map_bytes (best fit), or NULL.
 * Any size is taken: a cached mapping's pages are already resident, so
 * reusing a bigger one costs no memory a fresh one would not, and saves
 * faulting in fresh pages - a buffer that grows to the same size each
 * round reuses last round's mapping. */
static struct pcm_large *cache_take(size_t map_bytes)
{
    if (!pcm_load_relaxed(&cache_bytes))
        return NULL;
    for (unsigned tries = 0; tries < CACHE_TAKE_TRIES; tries++) {
        unsigned best = CACHE_SLOTS;
        pcm_word_t best_seen = 0;
        size_t best_bytes = SIZE_MAX;
        for (unsigned i = 0; i < CACHE_SLOTS; i++) {
            pcm_word_t seen = pcm_load_acquire(&cache_slot[i]);
            if (!seen)
                continue;
            size_t have = ((struct pcm_large *)seen)->map_bytes;
            if (have >= map_bytes && have < best_bytes) {
                best = i;
                best_seen = seen;
                best_bytes = have;
            }
        }
        if (best == CACHE_SLOTS)
            return NULL;
        if (pcm_cas_acq_rel(&cache_slot[best], &best_seen, 0)) {
            struct pcm_large *large = (struct pcm_large *)best_seen;
            pcm_fetch_sub_acq_rel(&cache_bytes, large->map_bytes);
            if (large->map_bytes >= map_bytes)
                return large;
            unmap_large(large); /* it left and came back smaller meanwhile */
        }
    }
    return NULL;
}

static bool cache_put(struct pcm_large *large)
{
    size_t bytes = large->map_bytes;
    if (bytes > CACHE_BYTES_MAX / 4)
        return false;
    if (pcm_fetch_add_acq_rel(&cache_bytes, bytes) + bytes > CACHE_BYTES_MAX) {
        pcm_fetch_sub_acq_rel(&cache_bytes, bytes);
        return false;
    }
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        pcm_word_t expected = 0;
        /* release: the header's state is visible to the taker */
        if (pcm_cas_acq_rel(&cache_slot[i], &expected, (pcm_word_t)large))
            return true;
    }
    pcm_fetch_sub_acq_rel(&cache_bytes, bytes);
    return false;
}

bool pcm_large_cache_trim(void)
{
    bool any = false;
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        struct pcm_large *large = (struct pcm_large *)pcm_swap_acq_rel(&cache_slot[i], 0);
        if (large) {
            pcm_fetch_sub_acq_rel(&cache_bytes, large->map_bytes);
            unmap_large(large);
            any = true;
        }
    }
    return any;
}

void *pcm_large_alloc(size_t size, size_t alignment, bool zeroed)
{
    pcm_ensure_init(); /* it may be the process's first allocation */
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
     * segment-aligned. */
    bool over_aligned = alignment > PCM_SEGMENT_SIZE;
    struct pcm_large *large = over_aligned ? NULL : cache_take(map_bytes);
    if (large && zeroed) /* calloc promises zeros for the size asked, no more */
        memset((char *)large + offset, 0, size);
    if (!large) {
        large = pcm_os_map_aligned(map_bytes, over_aligned ? alignment : PCM_SEGMENT_SIZE);
        if (!large)
            return NULL;
        large->kind = PCM_KIND_LARGE;
        large->map_bytes = map_bytes;
        if (!pcm_segment_map_set(large, map_bytes, large)) {
            pcm_os_unmap(large, map_bytes);
            errno = ENOMEM;
            return NULL;
        }
        pcm_stats_large_created(map_bytes);
    }
    large->object = (char *)large + offset;
    large->requested = size;
    return large->object;
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
    large->object = NULL;
    if (!cache_put(large))
        unmap_large(large);
}

/* Grow the mapping to new_bytes without copying: in place if the pages
 * above are free, else onto a fresh segment-aligned range (reserved first,
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
    struct pcm_large *target = pcm_os_map_aligned(new_bytes, PCM_SEGMENT_SIZE);
    if (!target)
        return NULL;
    if (!pcm_segment_map_prepare(target, new_bytes) ||
        !pcm_os_remap_fixed(large, old_bytes, new_bytes, target)) {
        pcm_os_unmap(target, new_bytes);
        return NULL;
    }
    pcm_segment_map_clear(large, old_bytes);
    return target;
}

/* Give back the tail beyond `need` bytes, with the chunks it covered. */
static void shrink_mapping(struct pcm_large *large, size_t need)
{
    size_t old_bytes = large->map_bytes;
    size_t kept_chunks = PCM_ALIGN_UP(need, PCM_SEGMENT_SIZE);
    if (old_bytes > kept_chunks)
        pcm_segment_map_clear((char *)large + kept_chunks, old_bytes - kept_chunks);
    pcm_os_unmap((char *)large + need, old_bytes - need);
    large->map_bytes = need;
    pcm_stats_large_resized(old_bytes, need);
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
        if (size < large->requested / 2 && need < old_bytes / 2)
            shrink_mapping(large, need);
        large->requested = size;
        return p;
    }
    /* Grow by at least a quarter: repeated small growth stays amortised. */
    size_t grown = PCM_ALIGN_UP(old_bytes + old_bytes / 4, PCM_PAGE_SIZE);
    size_t new_bytes = need > grown ? need : grown;
    struct pcm_large *moved = grow_mapping(large, new_bytes);
    if (!moved && new_bytes > need)
        moved = grow_mapping(large, new_bytes = need);
    if (!moved) {
        errno = ENOMEM;
        return NULL;
    }
    moved->map_bytes = new_bytes;
    moved->object = (char *)moved + offset;
    moved->requested = size;
    pcm_segment_map_set(moved, new_bytes, moved); /* leaves prepared: cannot fail */
    pcm_stats_large_resized(old_bytes, new_bytes);
    return moved->object;
}
