/*
 * segment.c - creating segments and cutting spans out of them.
 * Every function here runs under the owner heap's lock (or on a segment no
 * one else can see yet); nothing here calls malloc.
 */
#include "segment.h"

#include <errno.h>

#include "hardening.h"
#include "init.h"
#include "os.h"
#include "percpu_rseq.h"
#include "segment_map.h"
#include "segment_pool.h"
#include "stats.h"

#define HEADER_PAGES ((sizeof(struct pcm_segment) + PCM_PAGE_SIZE - 1) >> PCM_PAGE_SHIFT)

/* The bits of pages [first, last] that lie in word w of a page bitmap. */
static inline pcm_word_t word_mask(size_t w, size_t first, size_t last)
{
    pcm_word_t mask = ~(pcm_word_t)0;
    if (w == first / PCM_WORD_BITS)
        mask <<= first % PCM_WORD_BITS;
    if (w == last / PCM_WORD_BITS)
        mask &= ~(pcm_word_t)0 >> (PCM_WORD_BITS - 1 - last % PCM_WORD_BITS);
    return mask;
}

/* How many of pages [first, last] lie in word w: the bits of its mask. */
static inline size_t word_pages(size_t w, size_t first, size_t last)
{
    size_t lo = w * PCM_WORD_BITS, hi = lo + PCM_WORD_BITS - 1;
    return (last < hi ? last : hi) - (first > lo ? first : lo) + 1;
}

/* Set bits of a bitmap word.  Not __builtin_popcountl where the CPU has no
 * popcount instruction (K6, x86-64's baseline): gcc then calls libgcc's
 * loop over a byte table, which took 15 % of the instructions of a big
 * object's span cut and release (callgrind). */
static size_t bits_set(pcm_word_t w)
{
    _Static_assert(sizeof(pcm_word_t) == sizeof(unsigned long), "a bitmap word is an unsigned long");
#if defined(__POPCNT__) || defined(__aarch64__)
    return (size_t)__builtin_popcountl((unsigned long)w);
#else
    const pcm_word_t m1 = (pcm_word_t)0x5555555555555555ull, m2 = (pcm_word_t)0x3333333333333333ull;
    const pcm_word_t m4 = (pcm_word_t)0x0f0f0f0f0f0f0f0full, ones = (pcm_word_t)0x0101010101010101ull;
    w -= (w >> 1) & m1;              /* each 2 bits: their count */
    w = (w & m2) + ((w >> 2) & m2);  /* each 4 bits */
    w = (w + (w >> 4)) & m4;         /* each byte */
    return (size_t)((w * ones) >> (sizeof(pcm_word_t) * 8 - 8)); /* the bytes' sum, in the top byte */
#endif
}

/* Touched pages of [first, last] in word w.  Pages a span gave back are
 * all touched, fresh ones none: those two take no count of bits. */
static inline size_t word_touched(const struct pcm_segment *s, size_t w, size_t first, size_t last)
{
    pcm_word_t mask = word_mask(w, first, last), touched = s->page_touched[w] & mask;
    return touched == mask ? word_pages(w, first, last) : touched ? bits_set(touched) : 0;
}

/* Touched pages in [from, to). */
static size_t touched_pages(const struct pcm_segment *s, size_t from, size_t to)
{
    size_t count = 0;
    for (size_t w = from / PCM_WORD_BITS; from < to && w <= (to - 1) / PCM_WORD_BITS; w++)
        count += word_touched(s, w, from, to - 1);
    return count;
}

/* Pages [first, first + count) go into a span (used) or out of one: the
 * touched ones among them stop or start being spare. */
static void mark_pages(struct pcm_segment *s, size_t first, size_t count, bool used)
{
    size_t last = first + count - 1, touched = 0;
    for (size_t w = first / PCM_WORD_BITS; w <= last / PCM_WORD_BITS; w++) {
        pcm_word_t mask = word_mask(w, first, last);
        touched += word_touched(s, w, first, last);
        if (used)
            s->page_used[w] |= mask;
        else
            s->page_used[w] &= ~mask;
    }
    s->spare_pages = used ? s->spare_pages - (uint32_t)touched : s->spare_pages + (uint32_t)touched;
    if (used && s->high <= last)
        s->high = (uint32_t)(last + 1);
}

/* ---- header pages of descriptors ---- */

_Static_assert(HEADER_PAGES <= PCM_WORD_BITS, "a bit of descriptors_gone per header page");
_Static_assert(offsetof(struct pcm_segment, span) + sizeof(struct pcm_span) <= PCM_PAGE_SIZE,
               "span[0], where a free page's span_first leads, lies on header page 0: never decommitted");

/* Header page k's descriptors: [*first, *last].  False if the page holds
 * anything else (the segment's fields and bitmaps, or what follows the
 * descriptors). */
static bool descriptor_page(size_t k, size_t *first, size_t *last)
{
    size_t from = k << PCM_PAGE_SHIFT, to = from + PCM_PAGE_SIZE;
    size_t begin = offsetof(struct pcm_segment, span), end = begin + sizeof(((struct pcm_segment *)0)->span);
    if (from < begin || to > end)
        return false;
    *first = (from - begin) / sizeof(struct pcm_span);
    *last = (to - 1 - begin) / sizeof(struct pcm_span);
    return true;
}

/* Any of slots [first, last] in use?  (A word at a time: decay runs this
 * over every segment at each tick.) */
static bool slots_used(const struct pcm_segment *s, size_t first, size_t last)
{
    for (size_t w = first / PCM_WORD_BITS; w <= last / PCM_WORD_BITS; w++)
        if (s->slot_used[w] & word_mask(w, first, last))
            return true;
    return false;
}

/* The header pages that hold descriptors only, a bit each. */
static pcm_word_t pure_descriptor_pages(const struct pcm_segment *s)
{
    pcm_word_t pure = 0;
    size_t first, last;
    for (size_t k = 1; k < s->header_pages; k++)
        if (descriptor_page(k, &first, &last))
            pure |= (pcm_word_t)1 << k;
    return pure;
}

/* Decommit the header pages of s that hold descriptors only, none of
 * them in use; the bytes given back. */
static size_t decommit_idle_descriptors(struct pcm_segment *s)
{
    size_t released = 0, first, last;
    for (size_t k = 1; k < s->header_pages; k++) {
        pcm_word_t bit = (pcm_word_t)1 << k;
        if ((s->descriptors_gone & bit) || !descriptor_page(k, &first, &last) || slots_used(s, first, last))
            continue;
        if (!pcm_os_decommit((char *)s + (k << PCM_PAGE_SHIFT), PCM_PAGE_SIZE))
            continue; /* still there, still counted */
        s->descriptors_gone |= bit;
        released += PCM_PAGE_SIZE;
    }
    if (released)
        pcm_stats_decommitted(released);
    return released;
}

struct pcm_segment *pcm_segment_create(unsigned owner)
{
    /* A pooled chunk first: mapped already, and its address space is the
     * process's either way (segment_pool.h). */
    bool pooled = true;
    struct pcm_segment *s = pcm_segment_pool_take(1);
    if (!s) {
        pooled = false;
        s = pcm_os_map_aligned(PCM_SEGMENT_SIZE, PCM_SEGMENT_SIZE);
    }
    if (!s)
        return NULL;
    /* Before the header's first write: a range that faulted in small
     * pages keeps them. */
    /* Either way, before the first write.  Without the option, small pages
     * even where THP is "always": a 4 MiB-aligned segment would otherwise
     * get two huge pages at its first object, resident and never handed
     * back by decay, which gives back 4 KiB pages pcmalloc wrote. */
    if (pcm_opts.hugepages)
        pcm_os_hugepage(s, PCM_SEGMENT_SIZE);
    else
        pcm_os_no_huge_pages(s, PCM_SEGMENT_SIZE);
    s->kind = PCM_KIND_SEGMENT;
    s->owner = owner;
    s->header_pages = HEADER_PAGES;
    s->free_pages = (uint32_t)(PCM_SEGMENT_PAGES - HEADER_PAGES);
    mark_pages(s, 0, HEADER_PAGES, true);
    s->slot_used[0] = 1;
    /* The pages of descriptors only are not written until a span takes a
     * slot there (with huge pages, the header's huge page made them
     * resident: counted, and decommitted by decay while unused). */
    if (!pcm_opts.hugepages)
        s->descriptors_gone = pure_descriptor_pages(s);
    if (!pcm_hardened_segment_created(s) || !pcm_segment_map_set(s, PCM_SEGMENT_SIZE, s)) {
        if (pooled) {
            pcm_segment_pool_put(s, 1, false);
        } else {
            pcm_os_unmap(s, PCM_SEGMENT_SIZE);
        }
        errno = ENOMEM;
        return NULL;
    }
    pcm_segment_pool_index_add(s);
    if (pooled)
        pcm_stats_segment_unpooled();
    else
        pcm_stats_segment_mapped(PCM_SEGMENT_SIZE);
    pcm_stats_committed((HEADER_PAGES - bits_set(s->descriptors_gone)) << PCM_PAGE_SHIFT);
    for (size_t page = 0; page < HEADER_PAGES; page++)
        s->page_touched[page / PCM_WORD_BITS] |= (pcm_word_t)1 << (page % PCM_WORD_BITS);
    if (pcm_opts.hugepages) /* the header made its huge page resident: count the rest of it */
        pcm_segment_touched(s, (uintptr_t)s, (uintptr_t)s + PCM_PAGE_SIZE);
    return s;
}

bool pcm_segment_is_empty(const struct pcm_segment *s)
{
    return s->free_pages == PCM_SEGMENT_PAGES - s->header_pages;
}

/* The pages of s the counters hold as committed: the header's but those
 * of descriptors never written or given back, and every touched page
 * after it. */
static size_t committed_pages(const struct pcm_segment *s)
{
    size_t pages = s->header_pages - bits_set(s->descriptors_gone);
    for (size_t w = s->header_pages / PCM_WORD_BITS; w < PCM_SEGMENT_PAGES / PCM_WORD_BITS; w++)
        pages += bits_set(s->page_touched[w] & word_mask(w, s->header_pages, PCM_SEGMENT_PAGES - 1));
    return pages;
}

void pcm_segment_pool_release(struct pcm_segment *s)
{
    /* Out of the map first: a stale pointer into s is then an invalid
     * pointer, whatever it reads of the header being zeroed. */
    size_t committed = committed_pages(s);
    pcm_segment_map_clear(s, PCM_SEGMENT_SIZE);
    pcm_stats_decommitted(committed << PCM_PAGE_SHIFT);
    /* (A decommit the kernel refuses part way would leave half a header:
     * the pool clears what it could not drop.) */
    if (pcm_segment_pool_give_back(s, 1))
        pcm_stats_segment_unmapped(PCM_SEGMENT_SIZE);
    else
        pcm_stats_segment_pooled();
}

static bool page_is_touched(const struct pcm_segment *s, size_t page)
{
    return (s->page_touched[page / PCM_WORD_BITS] >> (page % PCM_WORD_BITS)) & 1;
}

size_t pcm_segment_spare_pages(const struct pcm_segment *s)
{
    return s->spare_pages;
}

/* The first page in [page, end) whose bit in map is `set`, else end: a
 * word at a time.  (Also the first slot of slot_used, a bitmap of as
 * many bits.) */
static size_t next_page(const pcm_word_t *map, size_t page, size_t end, bool set)
{
    while (page < end) {
        pcm_word_t word = set ? map[page / PCM_WORD_BITS] : ~map[page / PCM_WORD_BITS];
        word &= ~(pcm_word_t)0 << (page % PCM_WORD_BITS);
        size_t base = page - page % PCM_WORD_BITS;
        if (word) {
            size_t found = base + (size_t)__builtin_ctzl((unsigned long)word);
            return found < end ? found : end;
        }
        page = base + PCM_WORD_BITS;
    }
    return end;
}

/* The last page in [page, end) whose bit in map is set; there is one. */
static size_t last_page_set(const pcm_word_t *map, size_t page, size_t end)
{
    for (size_t w = (end - 1) / PCM_WORD_BITS;; w--) {
        pcm_word_t word = map[w] & word_mask(w, page, end - 1);
        if (word)
            return w * PCM_WORD_BITS + PCM_WORD_BITS - 1 - (size_t)__builtin_clzl((unsigned long)word);
    }
}

/* Two words of a page bitmap as one number: a window may cross a word's
 * end. */
#if UINTPTR_MAX > 0xffffffffu
typedef unsigned __int128 word_pair;
#else
typedef uint64_t word_pair;
#endif
_Static_assert(sizeof(word_pair) == 2 * sizeof(pcm_word_t), "a pair of bitmap words");

/* The spare pages (free and touched) of word w, the header's left out. */
static inline pcm_word_t spare_word(const struct pcm_segment *s, size_t w)
{
    return ~s->page_used[w] & s->page_touched[w] & word_mask(w, s->header_pages, PCM_SEGMENT_PAGES - 1);
}

/* The first window of `pages` spare pages (pages <= PCM_WORD_BITS), or
 * SIZE_MAX: the place best_window picks whenever there is one, found
 * without walking the runs.  With a word and the next as one number x,
 * `x & x >> 1` has a bit where two spare pages in a row start, and
 * doubling the shift each step gets to `pages` in a row in log2(pages)
 * steps; a window that starts in a word ends in it or the next.  A big
 * class's span cut and released for each malloc (sizeclass.c) made the
 * search by runs cost 250 instructions a malloc in a segment full of
 * short runs. */
static size_t first_spare_window(const struct pcm_segment *s, size_t pages)
{
    size_t words = ((size_t)s->high + PCM_WORD_BITS - 1) / PCM_WORD_BITS; /* (none spare past high) */
    pcm_word_t next = words ? spare_word(s, 0) : 0;
    for (size_t w = 0; w < words; w++) {
        pcm_word_t word = next;
        next = w + 1 < words ? spare_word(s, w + 1) : 0;
        if (!word)
            continue;
        word_pair starts = (word_pair)word | (word_pair)next << PCM_WORD_BITS;
        size_t run = 1;
        for (; run * 2 <= pages; run *= 2)
            starts &= starts >> run;
        starts &= starts >> (pages - run);
        if ((pcm_word_t)starts)
            return w * PCM_WORD_BITS + (size_t)__builtin_ctzl((unsigned long)(pcm_word_t)starts);
    }
    return SIZE_MAX;
}

/* Windows of `pages` free pages, in order of their first page, each
 * counting the touched pages in it; the first window with the fewest
 * untouched pages wins, and with `spare` 0 (none to look for) the first
 * window at all.  A window of spare pages alone, where there is one, is
 * found by first_spare_window.  Otherwise the bitmaps are read a word at
 * a time: runs of used pages are skipped, and within a run of free pages
 * only the windows that hold one of its touched pages can beat its first:
 * those from the one that ends at the first touched page to the one that
 * starts past the last, a page at a time.  A run with no touched page
 * offers its first window alone (a segment filling up with one-page spans,
 * or a fresh one, costs a few words per search, not a page each), and a
 * span that went back is found by a bit search, not by counting the pages
 * of every run before it. */
static size_t best_window(const struct pcm_segment *s, size_t pages, size_t spare, size_t *first)
{
    bool first_fit = spare == 0;
    if (spare >= pages && pages <= PCM_WORD_BITS) {
        size_t at = first_spare_window(s, pages);
        if (at != SIZE_MAX) {
            *first = at;
            return 0;
        }
    }
    size_t best = SIZE_MAX;
    for (size_t from = s->header_pages; from < PCM_SEGMENT_PAGES;) {
        from = next_page(s->page_used, from, PCM_SEGMENT_PAGES, false);
        /* (past s->high no page is used or touched) */
        size_t high = from < s->high ? s->high : from;
        size_t to = next_page(s->page_used, from, high, true);
        if (to == high)
            to = PCM_SEGMENT_PAGES;
        if (to - from >= pages) {
            size_t seen = to < high ? to : high, lead = next_page(s->page_touched, from, seen, true);
            size_t tail = lead < seen ? last_page_set(s->page_touched, lead, seen) : 0;
            if (lead == seen)
                lead = to;
            size_t at = from, touched = lead < from + pages ? touched_pages(s, from, from + pages) : 0;
            for (;;) {
                if (pages - touched < best) {
                    best = pages - touched;
                    *first = at;
                    if (first_fit || best == 0)
                        return best;
                }
                /* no touched page left to take in: no window here can do better */
                if (at + pages >= to || at + pages > tail)
                    break;
                if (at + pages <= lead) { /* the windows before lead's hold none */
                    at = lead + 1 - pages;
                    touched = touched_pages(s, at, at + pages);
                    continue;
                }
                touched += page_is_touched(s, at + pages);
                touched -= page_is_touched(s, at);
                at++;
            }
        }
        from = to;
    }
    return best;
}

size_t pcm_segment_place_span(const struct pcm_segment *s, size_t pages, size_t spare, size_t beat, size_t *first)
{
    if (s->free_pages < pages || pages - (spare < pages ? spare : pages) >= beat)
        return SIZE_MAX; /* no room, or it cannot do better: no need to look */
    size_t fresh = best_window(s, pages, spare, first);
    return fresh < beat ? fresh : SIZE_MAX;
}

/* The lowest free slot of span[], taken: its header page comes back (the
 * descriptor's write faults it in) and counts as committed again.  There
 * is always one: a span has a page of its own, and the header's pages
 * have no span. */
static size_t slot_take(struct pcm_segment *s)
{
    size_t slot = next_page(s->slot_used, 1, PCM_SEGMENT_PAGES, false);
    s->slot_used[slot / PCM_WORD_BITS] |= (pcm_word_t)1 << (slot % PCM_WORD_BITS);
    /* (Two pages where a descriptor straddles a page boundary: descriptors
     * are 96 bytes on 64-bit builds, 44 on 32-bit ones.) */
    size_t at = offsetof(struct pcm_segment, span) + slot * sizeof(struct pcm_span);
    for (size_t k = at >> PCM_PAGE_SHIFT; k <= (at + sizeof(struct pcm_span) - 1) >> PCM_PAGE_SHIFT; k++) {
        pcm_word_t bit = (pcm_word_t)1 << k;
        if (s->descriptors_gone & bit) {
            s->descriptors_gone &= ~bit;
            pcm_stats_committed(PCM_PAGE_SIZE);
        }
    }
    return slot;
}

struct pcm_span *pcm_segment_span_cut(struct pcm_segment *s, size_t first, unsigned cls, size_t pages)
{
    mark_pages(s, first, pages, true);
    s->free_pages -= (uint32_t)pages;
    size_t slot = slot_take(s);
    struct pcm_span *span = &s->span[slot];
    for (size_t i = 0; i < pages; i++)
        s->span_first[first + i] = (uint16_t)(slot * sizeof(struct pcm_span) / PCM_SPAN_FIRST_SCALE);
    span->class_plus1 = (uint16_t)(cls + 1);
    span->owner = (uint16_t)s->owner;
    pcm_span_set_size(span, (uint32_t)pcm_class_size(cls));
    span->slot0 = pcm_rseq_slot0(cls);
    pcm_span_set_start(span, (uintptr_t)s + (first << PCM_PAGE_SHIFT));
    span->used = 0;
    pcm_span_set_carved(span, 0);
    span->pages = (uint16_t)pages;
    span->listed = span->active = span->trimmed = 0;
    span->free = NULL;
    span->prev = span->next = NULL;
    pcm_hardened_span_created(span);
    return span;
}

void pcm_segment_reserve_pages(struct pcm_segment *s, size_t first, size_t count)
{
    mark_pages(s, first, count, true);
}

struct pcm_span *pcm_segment_span_create(struct pcm_segment *s, unsigned cls, size_t pages)
{
    size_t first;
    if (pcm_segment_place_span(s, pages, pcm_segment_spare_pages(s), SIZE_MAX, &first) == SIZE_MAX)
        return NULL;
    return pcm_segment_span_cut(s, first, cls, pages);
}

void pcm_segment_touched(struct pcm_segment *s, uintptr_t start, uintptr_t end)
{
    size_t first = (start - (uintptr_t)s) >> PCM_PAGE_SHIFT;
    size_t last = (end - 1 - (uintptr_t)s) >> PCM_PAGE_SHIFT;
    /* With huge pages a first touch makes the whole huge page resident:
     * count it so, and let decay see its pages as touched. */
    if (pcm_opts.hugepages) {
        first &= ~(PCM_HUGE_PAGE_PAGES - 1);
        last |= PCM_HUGE_PAGE_PAGES - 1;
    }
    /* A word of the bitmap at a time: a huge page is 512 pages, and this
     * runs for every span cut. */
    size_t fresh = 0, spare = 0;
    for (size_t w = first / PCM_WORD_BITS; w <= last / PCM_WORD_BITS; w++) {
        pcm_word_t new_bits = word_mask(w, first, last) & ~s->page_touched[w];
        s->page_touched[w] |= new_bits;
        if (new_bits & ~s->page_used[w]) /* (huge pages: free pages made resident) */
            spare += bits_set(new_bits & ~s->page_used[w]);
        for (; new_bits; new_bits &= new_bits - 1)
            fresh++;
    }
    s->spare_pages += (uint32_t)spare;
    if (s->high <= last)
        s->high = (uint32_t)(last + 1);
    if (fresh)
        pcm_stats_committed(fresh << PCM_PAGE_SHIFT);
}

void pcm_segment_span_release(struct pcm_segment *s, struct pcm_span *span)
{
    size_t first = (span->start - (uintptr_t)s) >> PCM_PAGE_SHIFT, slot = (size_t)(span - s->span);
    for (size_t i = 0; i < span->pages; i++)
        s->span_first[first + i] = 0;
    /* Free's check that p is in a span, for a stale span_first read. */
    span->class_plus1 = 0;
    pcm_span_set_carved(span, 0);
    s->slot_used[slot / PCM_WORD_BITS] &= ~((pcm_word_t)1 << (slot % PCM_WORD_BITS));
    mark_pages(s, first, span->pages, false);
    s->free_pages += span->pages;
}

static bool page_is_free_touched(const struct pcm_segment *s, size_t page, bool stale)
{
    size_t w = page / PCM_WORD_BITS;
    pcm_word_t bits = ~s->page_used[w] & s->page_touched[w];
    if (stale)
        bits &= s->page_was_free[w];
    return (bits >> (page % PCM_WORD_BITS)) & 1;
}

size_t pcm_segment_decommit_pages(struct pcm_segment *s, size_t first, size_t end)
{
    /* A refusal (fault injection, ENOMEM splitting a VMA) keeps the pages
     * counted: they are still there. */
    size_t bytes = (end - first) << PCM_PAGE_SHIFT;
    if (!pcm_os_decommit((char *)s + (first << PCM_PAGE_SHIFT), bytes))
        return 0;
    for (size_t p = first; p < end; p++) {
        pcm_word_t bit = (pcm_word_t)1 << (p % PCM_WORD_BITS);
        if ((s->page_touched[p / PCM_WORD_BITS] & ~s->page_used[p / PCM_WORD_BITS]) & bit)
            s->spare_pages--;
        s->page_touched[p / PCM_WORD_BITS] &= ~bit;
    }
    pcm_stats_decommitted(bytes);
    return bytes;
}

/* Decommit the runs of pages of s in no span, touched, and (if `stale`)
 * free at the last decay tick too. */
static size_t decommit_where(struct pcm_segment *s, bool stale)
{
    size_t released = 0;
    for (size_t page = s->header_pages; page < PCM_SEGMENT_PAGES;) {
        if (!page_is_free_touched(s, page, stale)) {
            page++;
            continue;
        }
        size_t first = page;
        while (page < PCM_SEGMENT_PAGES && page_is_free_touched(s, page, stale))
            page++;
        released += pcm_segment_decommit_pages(s, first, page);
    }
    return released;
}

size_t pcm_segment_decommit_free(struct pcm_segment *s)
{
    return decommit_where(s, false) + decommit_idle_descriptors(s);
}

size_t pcm_segment_decay(struct pcm_segment *s, bool all)
{
    size_t released = decommit_where(s, !all) + decommit_idle_descriptors(s);
    for (size_t w = 0; w < PCM_SEGMENT_PAGES / PCM_WORD_BITS; w++)
        s->page_was_free[w] = ~s->page_used[w] & s->page_touched[w];
    return released;
}
