/*
 * large.h - objects above PCM_SMALL_MAX: each on a mapping of its own,
 * starting on a granule boundary (layout.h: PCM_MAP_GRANULE) so the
 * segment map finds its header.
 *
 * The header sits at the start of the mapping; the object starts at the
 * first multiple of its alignment (at least a page) after it.  realloc
 * grows a large object with mremap - in place if the pages above are free,
 * else moved without copying - and grows the mapping geometrically, so a
 * string appended to 4 KiB at a time costs amortised O(1) per step.
 * Freed mappings wait in a cache bounded in bytes (large_cache.h) so a
 * program that allocates and frees big buffers in a loop does not pay an
 * mmap and munmap each time.
 */
#ifndef PCM_LARGE_H
#define PCM_LARGE_H

#include <stdbool.h>
#include <stddef.h>

#include "atomic.h"

struct pcm_large {
    pcm_word_t kind;   /* PCM_KIND_LARGE */
    void *object;      /* the pointer handed out; NULL while cached */
    size_t map_bytes;  /* the whole mapping, header included */
    size_t requested;  /* the size last asked for (alloc or realloc) */
    /* On chunks lent by the segment pool (segment_pool.h), when the OS had
     * no address space left: never unmapped, moved or cut, nor cached;
     * the chunks go back to the pool when the object is freed. */
    bool pooled;
};

/* zeroed: the caller needs zeros (calloc); a reused mapping is cleared,
 * a fresh one already is. */
void *pcm_large_alloc(size_t size, size_t alignment, bool zeroed);
/* A cached mapping of at most most_bytes made the object of `size` bytes
 * (size <= PCM_SMALL_MAX); NULL if the cache holds none: nothing is mapped. */
void *pcm_large_alloc_cached(size_t size, size_t most_bytes);
/* Bytes usable from the object to the end of its mapping. */
size_t pcm_large_usable(const struct pcm_large *large);
/* `call` names the API function for the error message. */
void pcm_large_free(struct pcm_large *large, void *p, const char *call);
/* realloc of a large object; NULL (errno ENOMEM) leaves it as it was. */
void *pcm_large_realloc(struct pcm_large *large, void *p, size_t size);
/* Unmap a mapping no one uses (a freed one the cache does not keep). */
void pcm_large_unmap(struct pcm_large *large);
/* Check p is the live object of this header, else report and abort. */
void pcm_large_check(struct pcm_large *large, void *p, const char *call);

#endif
