/*
 * sizeclass.h - size classes of small objects, and the spans that hold them.
 *
 * A request of 0 .. PCM_SMALL_MAX bytes is served from the smallest class
 * at least that large; larger requests are "large" objects, mapped on
 * their own elsewhere.  The classes (table in sizeclass.c):
 *   - every class is a multiple of 16: every object is 16-byte aligned on
 *     every arch (glibc's malloc aligns to 16 even on i386, and SSE code
 *     relies on it);
 *   - 16, 32, ..., 128 in steps of 16.  Between 64 and 128 this is coarser
 *     than 12.5% (65 bytes get 80: 23%), but 16 bytes is the finest step
 *     the alignment allows;
 *   - above 128, eight classes per doubling: (2^k, 2^(k+1)] in steps of
 *     2^k / 8, so a request r > 128 gets a class c with
 *     (c - r) / r < 1/8: rounding waste under 12.5%;
 *   - from 1 KiB on, a ninth class per doubling just above the power of
 *     two, 2^k + 2^k / 16: programs ask for a power of two and a small
 *     header often (SQLite's pages and buffers: 1024 + 8 and 4096 + 8
 *     bytes), which the eight alone round up by 12%, and that class takes
 *     them for 6% at most;
 *   - 104 classes, the last PCM_SMALL_MAX = 256 KiB.
 * Nothing here allocates, locks, or loops over the table on the hot path.
 */
#ifndef PCM_SIZECLASS_H
#define PCM_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>

/* Largest small object; anything larger is a large object. */
#define PCM_SMALL_MAX ((size_t)256 * 1024)
/* 8 classes up to 128, 8 per doubling from 128 to 1 KiB (3), then 9 per
 * doubling up to 256 KiB (8). */
#define PCM_CLASS_COUNT 104u
/* The first class above 1 KiB, where the doublings of nine begin. */
#define PCM_CLASS_ABOVE_1K 32u

/*
 * Span geometry (see sizeclass.c for why).  Span sizes are counted in
 * 4 KiB units whatever the kernel's page size: the classes and the table
 * are then the same on every build.  With 16 or 64 KiB kernel pages
 * (some arm64 kernels), the span layer rounds decommits to real pages.
 */
#define PCM_SPAN_PAGE_BYTES 4096u
/* A span is at least this large... */
#define PCM_SPAN_MIN_BYTES (16u * 1024)
/* ...holds PCM_SPAN_MIN_OBJECTS objects of a class up to
 * PCM_SPAN_SINGLE_ABOVE bytes and one of a bigger class (the big classes,
 * from PCM_CLASS_BIG_FIRST on; sizeclass.c says why), so it is never above
 * the cap... */
#define PCM_SPAN_MIN_OBJECTS 8u
#define PCM_SPAN_SINGLE_ABOVE (16u * 1024)
#define PCM_CLASS_BIG_FIRST 68u
#define PCM_SPAN_CAP_BYTES (1024u * 1024)
/* ...and the unused tail of a span of several objects (span bytes mod
 * object size) is at most span bytes / PCM_SPAN_TAIL_DIVISOR (6.25%); a
 * big class's span is its object rounded up to whole pages. */
#define PCM_SPAN_TAIL_DIVISOR 16u

struct pcm_size_class {
    uint32_t size;         /* object bytes, a multiple of 16 */
    uint16_t span_pages;   /* span length in PCM_SPAN_PAGE_BYTES units */
    uint16_t span_objects; /* span_pages * 4096 / size */
};

extern const struct pcm_size_class pcm_size_classes[PCM_CLASS_COUNT];

/* Requests up to this size find their class in a table (sizeclass.c):
 * one load instead of the arithmetic below, for the sizes most programs
 * ask for most. */
#define PCM_CLASS_TABLE_MAX 1024u
extern const uint8_t pcm_class_of_step[PCM_CLASS_TABLE_MAX / 16];

/* The class of a request of size > 1 KiB, size <= PCM_SMALL_MAX.
 * O(1): for size in (2^k, 2^(k+1)] with k >= 10, s = size - 1 has its top
 * bit at k, and its next four bits, m = s >> (k - 4) in 16..31, say in
 * which sixteenth of the doubling the request lies.  m = 16 (up to
 * 2^k + 2^k / 16) is the doubling's first class; m = 17..31 pick the
 * class of 2^k + j * 2^k / 8 with j = ceil((m - 15) / 2) = (m - 14) / 2. */
static inline unsigned pcm_size_class_above_1k(size_t size)
{
    unsigned long s = (unsigned long)size - 1;
    unsigned k = (unsigned)(sizeof(unsigned long) * 8 - 1) - (unsigned)__builtin_clzl(s);
    unsigned m = (unsigned)(s >> (k - 4));
    return PCM_CLASS_ABOVE_1K + (k - 10) * 9 + ((m - 14) >> 1) - (m == 16);
}

/* The class of a request of `size` bytes, size <= PCM_SMALL_MAX (0 gets
 * class 0). */
static inline unsigned pcm_size_class(size_t size)
{
    if (size <= 128)
        return (unsigned)((size - (size != 0)) >> 4);
    if (size <= PCM_CLASS_TABLE_MAX)
        return pcm_class_of_step[(size - 1) >> 4];
    return pcm_size_class_above_1k(size);
}

/* Object bytes of class cls < PCM_CLASS_COUNT. */
static inline size_t pcm_class_size(unsigned cls)
{
    return pcm_size_classes[cls].size;
}

/* 4 KiB pages in a span of class cls. */
static inline size_t pcm_class_span_pages(unsigned cls)
{
    return pcm_size_classes[cls].span_pages;
}

/* Objects in a span of class cls (>= 8 up to 64 KiB, 1 above). */
static inline unsigned pcm_class_span_objects(unsigned cls)
{
    return pcm_size_classes[cls].span_objects;
}

#endif
