/*
 * segment.h - segments and the spans carved from them.
 *
 * A segment is a PCM_SEGMENT_SIZE-aligned mapping owned by one per-CPU heap
 * for its whole life.  Its first pages hold this header: a bitmap of the
 * pages in use, room for a span descriptor per page and a 16-bit map from
 * each page to its span's descriptor.  A span is a run of pages holding
 * objects of one size class, described by one descriptor, so pointer ->
 * span is: segment = p & ~(SEGMENT_SIZE - 1), page index, span_first[page]
 * (the byte offset of the descriptor in span[] over 8, so free adds it
 * with a scaled lea).  The map is 2 bytes a page where the descriptors are
 * 96: free touches 48 times fewer lines to find a span than through
 * descriptors of their own pages.  (Each page's descriptor holding a copy
 * of its span's fields, which free found with no load of the map, was no
 * faster: threadtest at one thread, 0.86 to 1.12 of this in 10
 * interleaved sets.)
 *
 * A span's descriptor is the lowest slot of span[] free when it is cut
 * (slot_used), not its first page's: the descriptors in use stay packed
 * at the front, on a few header pages.  With a descriptor per first page,
 * a segment of 4-page spans wrote all 15 pages of descriptors for 251 of
 * them (4 do): the fragmentation benchmark kept 41.7 MB resident after
 * malloc_trim in 68 segments, 38.4 MB with them packed (glibc 39.8).
 *
 * On the CAS path segments are never unmapped (only decommitted): a
 * stale read by a concurrent lock-free pop of memory in them must never
 * fault.  An empty one goes to the segment pool (segment_pool.h), still
 * mapped; on the rseq path, which has no such read, it is unmapped.  A
 * header page holding only descriptors is not written, or decommitted
 * again, while none of its slots is in use (descriptors_gone): zeroes are
 * what a descriptor in no use holds where free's check reads it
 * (class_plus1, carved); a free page's span_first is 0, slot 0, which is
 * never a span's and lies on header page 0, never decommitted.
 *
 * Who writes what:
 *   - everything in a segment header and a span descriptor is written only
 *     by a thread holding the owner heap's lock (heap.h);
 *   - the fields marked [published] are set before the span's objects can
 *     reach anyone and stay fixed while any of them is allocated, so the
 *     free path of any thread reads them without the lock;
 *   - the objects themselves: see heap.h for the lists they travel on.
 *
 * Span invariants (under the owner's lock):
 *   capacity == used + |free list| + (capacity - carved)
 *     used:    objects outside the span - in the application, a per-CPU
 *              cache or a remote-free queue;
 *     free:    objects returned to the span, linked through their word 0
 *              (encoded in the hardened build, hardening.h);
 *     carved:  objects ever cut from the span's memory (bump allocation
 *              keeps untouched pages uncommitted).
 *   listed == (span is on its bin's partial list), and a span is on it iff
 *   it can still give out an object (free list non-empty or carved <
 *   capacity).
 */
#ifndef PCM_SEGMENT_H
#define PCM_SEGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"
#include "layout.h"
#include "sizeclass.h"

/* The first word of every owner found in the segment map. */
enum pcm_owner_kind {
    PCM_KIND_SEGMENT = 0x5E65u, /* a segment of small-object spans */
    PCM_KIND_LARGE = 0x1A76u,   /* a large object's own mapping */
};

/* 64-bit builds check that free's pointer is an object's start with one
 * 64-bit multiply and one compare (pcm_span_holds_object); 32-bit ones,
 * which have no 64-bit multiply to spare, with pcm_span_index's 32-bit
 * multiply and rotate. */
#if UINTPTR_MAX > 0xffffffffu
#define PCM_SPAN_MULTIPLY_CHECK 1
/* Aligned to 32 (96 bytes in all), so free's fields, the first 32 bytes,
 * never straddle two cache lines. */
#define PCM_SPAN_ALIGN __attribute__((aligned(32)))
#else
#define PCM_SPAN_MULTIPLY_CHECK 0
#define PCM_SPAN_ALIGN
#endif

/* Ordered without holes, free's fields first. */
struct pcm_span {
    /* [published] */
    uint16_t class_plus1;  /* 0: page not in a span (free, or the header) */
    uint16_t owner;        /* heap index */
#if PCM_SPAN_MULTIPLY_CHECK
    uint32_t start_low;    /* start's low 32 bits: free's offsets are 32-bit */
#endif
    pcm_word_t *slot0;     /* CPU 0's cache slot of the class (percpu_rseq.h):
                              the rseq free's push goes there with no table */
#if PCM_SPAN_MULTIPLY_CHECK
    uint64_t object_multiplier; /* 2^64 / object_size rounded down, plus 1 */
    /* owner's lock */
    uint64_t carved_limit; /* carved * object_multiplier * object_size, the
                              product mod 2^64 (pcm_span_set_carved); read
                              without the lock by free's check */
    /* [published] */
#endif
    uintptr_t start;       /* address of object 0 */
    uint32_t object_size;
    uint32_t size_inverse; /* of object_size's odd part, mod 2^32: see pcm_span_index */
    /* owner's lock */
    uint32_t used;
    uint32_t carved;       /* also read without the lock by free's check
                              (32-bit builds); 0 in every descriptor that
                              starts no span, and so is carved_limit */
    uint16_t pages;
    uint8_t listed : 1;    /* on its class's partial list */
    uint8_t active : 1;    /* objects cut from it or back since the last decay tick */
    uint8_t trimmed : 1;   /* its free pages given back since it was last active */
    uint8_t size_shift;    /* [published] object_size's trailing zero bits */
    void *free;
    struct pcm_span *prev, *next; /* the bin's partial list */
} PCM_SPAN_ALIGN;
_Static_assert(!PCM_SPAN_MULTIPLY_CHECK || sizeof(struct pcm_span) == 96, "a span descriptor is 96 bytes");
/* span_first holds a descriptor's byte offset over this: free's lea scales
 * it back for free. */
#define PCM_SPAN_FIRST_SCALE (sizeof(struct pcm_span) % 8 == 0 ? 8u : 4u)
_Static_assert(sizeof(struct pcm_span) % 4 == 0, "a descriptor's offset is a multiple of the scale");
_Static_assert((PCM_SEGMENT_PAGES - 1) * sizeof(struct pcm_span) / PCM_SPAN_FIRST_SCALE <= UINT16_MAX,
               "span_first holds a descriptor's scaled byte offset");

#define PCM_WORD_BITS (sizeof(pcm_word_t) * 8)

struct pcm_segment {
    pcm_word_t kind;              /* PCM_KIND_SEGMENT */
    uint32_t owner;               /* heap index */
    uint32_t header_pages;
    uint32_t free_pages;
    uint32_t was_empty;           /* no span at the last decay tick (decay.c) */
    /* Pages in no span and touched: those a span takes without committing
     * memory.  Kept with the bitmaps, so that a span cut that looks for
     * them reads a field, not both bitmaps (pcm_segment_spare_pages). */
    uint32_t spare_pages;
    /* Every page from here on is free and untouched (an upper bound: it
     * only grows), so that a search for a span's place stops here instead
     * of reading the bitmaps to the segment's end. */
    uint32_t high;
    struct pcm_segment *next;     /* the owner heap's segments */
#ifdef PCM_HARDENED
    pcm_word_t link_key;          /* the owner heap's secret (hardening.h) */
#endif
    pcm_word_t page_used[PCM_SEGMENT_PAGES / PCM_WORD_BITS];
    pcm_word_t page_touched[PCM_SEGMENT_PAGES / PCM_WORD_BITS]; /* objects were ever cut there */
    /* Free and touched at the last decay tick (pcm_segment_decay). */
    pcm_word_t page_was_free[PCM_SEGMENT_PAGES / PCM_WORD_BITS];
    /* Header pages of span descriptors not written since the segment was
     * mapped, or given back to the OS since: none of their slots was in
     * use (pcm_segment_decommit_free, _decay).  Read as zeroes - "in no
     * span" - until a span takes one of their slots. */
    pcm_word_t descriptors_gone;
    /* Slots of span[] that describe a span; slot 0 always set (no span's). */
    pcm_word_t slot_used[PCM_SEGMENT_PAGES / PCM_WORD_BITS];
    /* [published] Page -> byte offset in span[] of its span's descriptor
     * over PCM_SPAN_FIRST_SCALE for a page in a span, 0 for any other
     * page. */
    uint16_t span_first[PCM_SEGMENT_PAGES];
    /* 64-byte aligned: on 64-bit builds, where descriptors are 32-byte
     * aligned, the fields free reads lie on one cache line (unaligned, at
     * 0x9a8, a descriptor straddled two, and free loaded both). */
    struct pcm_span span[PCM_SEGMENT_PAGES] __attribute__((aligned(64)));
#ifdef PCM_HARDENED
    /* One bit per 16-byte unit of the segment.  Invariant: an object's bit
     * is set iff it is free - in a per-CPU cache, on a remote queue or its
     * span's free list, or carved and not yet handed out.  Set by the CAS
     * of the free that claims it (of two racing frees of one pointer,
     * exactly one sees it clear), cleared by the CAS of the malloc that
     * hands it out; whole words cleared when a new span takes the pages.
     * Bits, not pointers: no ABA.  CAS because frees of neighbouring
     * objects on other CPUs share a word. */
    volatile pcm_word_t free_bits[PCM_SEGMENT_SIZE / PCM_MIN_ALIGN / PCM_WORD_BITS];
#endif
};

static inline struct pcm_segment *pcm_segment_of(const void *p)
{
    return (struct pcm_segment *)((uintptr_t)p & ~(uintptr_t)(PCM_SEGMENT_SIZE - 1));
}

/* The span holding p in segment s (class_plus1 == 0 if none). */
static inline struct pcm_span *pcm_span_of(struct pcm_segment *s, const void *p)
{
    /* The page from p alone (not p - s), so that it does not wait for s. */
    size_t page = ((uintptr_t)p >> PCM_PAGE_SHIFT) & (PCM_SEGMENT_PAGES - 1);
    size_t scaled = s->span_first[page];
    return (struct pcm_span *)((char *)s->span + scaled * PCM_SPAN_FIRST_SCALE);
}

/*
 * The index of the object at byte `offset` of a span, without a division,
 * and a check in one: object_size = d * 2^k with d odd, and with i the
 * inverse of d mod 2^32, rotating offset * i right by k gives
 *   - offset / object_size exactly when object_size divides offset;
 *   - otherwise a number above (2^32 - 1) / object_size, so above the index
 *     of any object of the span (spans are at most 1 MiB: offsets below
 *     2^20).
 * Either the low k bits of offset are not all zero, and the odd i keeps
 * them so and the rotation moves them to the top; or offset = y * 2^k with
 * y not a multiple of d, and y * i mod 2^(32-k) then exceeds
 * (2^(32-k) - 1) / d (the multiples of d below 2^(32-k) are exactly the
 * numbers that multiplying by i maps to that range or below).  So "index <
 * carved" alone says offset is an object cut from the span.
 */
static inline uint32_t pcm_span_index(const struct pcm_span *span, uint32_t offset)
{
    uint32_t x = offset * span->size_inverse;
    unsigned k = span->size_shift;
    return (x >> k) | (x << ((32u - k) & 31u));
}

/* The inverse mod 2^32 of odd d (Newton: each step doubles the correct low
 * bits, and d is its own inverse mod 8). */
static inline uint32_t pcm_odd_inverse(uint32_t d)
{
    uint32_t i = d;
    for (int step = 0; step < 4; step++)
        i *= 2u - d * i;
    return i;
}

/* The objects a span of its class holds (the class fixes it). */
static inline uint32_t pcm_span_capacity(const struct pcm_span *span)
{
    return pcm_class_span_objects(span->class_plus1 - 1u);
}

/* Set span's object size and what pcm_span_index and
 * pcm_span_holds_object need of it. */
static inline void pcm_span_set_size(struct pcm_span *span, uint32_t size)
{
    span->object_size = size;
    span->size_shift = (uint8_t)__builtin_ctz(size);
    span->size_inverse = pcm_odd_inverse(size >> span->size_shift);
#if PCM_SPAN_MULTIPLY_CHECK
    /* floor(2^64 / size) + 1: UINT64_MAX / size is one less where size,
     * a power of two, divides 2^64 */
    uint64_t below = UINT64_MAX / size + (UINT64_MAX % size == size - 1u);
    span->object_multiplier = below + 1u;
#endif
}

/* Set span's count of objects cut (and free's bound with it). */
static inline void pcm_span_set_carved(struct pcm_span *span, uint32_t carved)
{
    span->carved = carved;
#if PCM_SPAN_MULTIPLY_CHECK
    span->carved_limit = (uint64_t)carved * (span->object_multiplier * span->object_size);
#endif
}

/* Set span's start (before its objects are published). */
static inline void pcm_span_set_start(struct pcm_span *span, uintptr_t start)
{
    span->start = start;
#if PCM_SPAN_MULTIPLY_CHECK
    span->start_low = (uint32_t)start;
#endif
}

/*
 * Whether p, in span's segment, is the start of an object carved from
 * span: the check every free makes before it trusts p.
 *
 * 64-bit builds: with d = object_size, c = object_multiplier (2^64 / d
 * rounded down, plus 1) and e = c * d - 2^64, so 1 <= e <= d, write the
 * offset n = p - start (32 bits) as q * d + r.  Then c * n mod 2^64 is
 *   - q * e when r == 0: below carved * e (carved_limit) exactly when
 *     q < carved, as e >= 1;
 *   - q * e + r * c, with no wrap, when r > 0: at least c > 2^44 (d is at
 *     most 1 MiB), above any carved_limit (at most a span's bytes).
 * No wrap: q * e <= n < 2^32 and r * c <= (d - 1) * c = 2^64 + e - c,
 * with c > 2^32 + e.  An n that wrapped below start reads above 2^32 - 2^22
 * (p and start lie in one 4 MiB segment): q is then past any carved.  So
 * one multiply and one compare, with no rotate by a loaded count.
 * 32-bit builds: pcm_span_index's rotate and compare.
 * carved only grows while the span lives, so an object handed out is
 * always below the bound; read without the lock, it can only be larger.
 * A page in no span is its own descriptor with both bounds 0, so this
 * also rejects p there.
 */
static inline bool pcm_span_holds_object(const struct pcm_span *span, const void *p)
{
#if PCM_SPAN_MULTIPLY_CHECK
    uint64_t offset = (uint32_t)((uint32_t)(uintptr_t)p - span->start_low);
    return offset * span->object_multiplier < span->carved_limit;
#else
    return pcm_span_index(span, (uint32_t)((uintptr_t)p - span->start)) < span->carved;
#endif
}

/* A new segment for heap `owner`, registered in the segment map; NULL with
 * errno == ENOMEM if the OS has no memory. */
struct pcm_segment *pcm_segment_create(unsigned owner);

/* Whether s has no span (every page but the header's free). */
bool pcm_segment_is_empty(const struct pcm_segment *s);

/* Give s, empty and out of its heap's list, to the segment pool
 * (segment_pool.h): out of the map, every page decommitted, the counters
 * told.  Caller holds the owner's lock (s's fields are read). */
void pcm_segment_pool_release(struct pcm_segment *s);

/* Pages of s in no span that objects were written on: still resident
 * until decay gives them back.  Caller holds the owner's lock. */
size_t pcm_segment_spare_pages(const struct pcm_segment *s);

/* Where in s a span of `pages` pages commits the fewest new pages: the
 * run of free pages that holds the most spare ones (pcm_segment_spare_pages
 * says s has `spare`).  A span cut over them reuses them, where first fit
 * would often cut into fresh pages and let a long-running program's
 * footprint creep up.  Sets *first and returns how many of the run's pages
 * are untouched, if that is below `beat`; else SIZE_MAX, also when s has
 * no run of that many free pages.  With spare == 0, first fit: one scan
 * that stops at the first run.  Caller holds the owner's lock. */
size_t pcm_segment_place_span(const struct pcm_segment *s, size_t pages, size_t spare, size_t beat, size_t *first);

/* Cut a span of class cls at pages [first, first + pages) of s, all free
 * (pcm_segment_place_span).  Caller holds the owner's lock. */
struct pcm_span *pcm_segment_span_cut(struct pcm_segment *s, size_t first, unsigned cls, size_t pages);

/* Cut a span of `pages` pages for class cls from s, where
 * pcm_segment_place_span says; NULL if s has no run of that many free
 * pages.  Caller holds the owner's lock. */
struct pcm_span *pcm_segment_span_create(struct pcm_segment *s, unsigned cls, size_t pages);

/* Objects in [start, end) of s are about to be handed out for the first
 * time: count the pages this touches first (spans are cut lazily, so pages
 * no object was cut from cost nothing).  Caller holds the owner's lock. */
void pcm_segment_touched(struct pcm_segment *s, uintptr_t start, uintptr_t end);

/* Pages [first, first + count) of a new segment s kept out of every span
 * (hardening.c: its guard pages), marked used as a span's are, so that
 * the counts kept with the bitmaps stay right. */
void pcm_segment_reserve_pages(struct pcm_segment *s, size_t first, size_t count);

/* Give back to the OS every page of s in no span that objects were ever
 * written on, and forget it was touched, and every header page that
 * describes only pages in no span; the bytes given back.  The pages
 * stay mapped (reading them gives zeros), so a stale read of a CAS pop
 * still cannot fault.  Caller holds the owner's lock. */
size_t pcm_segment_decommit_free(struct pcm_segment *s);

/* Decommit pages [first, end) of s and forget they were touched; the
 * bytes given back (0 if the kernel refused: they stay counted).  Caller
 * holds the owner's lock. */
size_t pcm_segment_decommit_pages(struct pcm_segment *s, size_t first, size_t end);

/* A decay tick: decommit the pages of s that were free (in no span) and
 * touched at the previous tick and still are - pages that stayed free for
 * a whole tick period - and remember which are free now.  The bytes given
 * back.  Caller holds the owner's lock.
 * With PCMALLOC_HUGEPAGES=1 a first touch marks its whole huge page
 * touched (it is all resident), so the free pages of a huge page go back
 * too, never-used ones included.  A huge page that is free as a whole is
 * given back whole; one that is partly in use is split by the kernel (the
 * trade-off: memory back after a purge delay beats keeping a huge TLB
 * entry for mostly free memory - measured in the README). */
size_t pcm_segment_decay(struct pcm_segment *s, bool all);

/* Decommit the pages of a span in use whose every carved object is on
 * its free list; those objects, and any other free object touching such
 * a page, leave the free list and stay out of use until the span is given
 * back whole.  The bytes given back.  Caller holds the owner's lock
 * (span_trim.c). */
size_t pcm_span_trim_free_pages(struct pcm_segment *s, struct pcm_span *span);

/* Give a span's pages back to its segment for other spans (they stay
 * committed: giving memory back to the OS after a delay is decay's job).
 * Caller holds the owner's lock; the span has no object outside it. */
void pcm_segment_span_release(struct pcm_segment *s, struct pcm_span *span);

#endif
