/*
 * tests/unit/segment.c - the span arithmetic of segment.h that free's
 * check rests on: pcm_span_index must give every object's index exactly,
 * and for every other offset in a span an index no object of the span has,
 * so that "index < carved" alone accepts exactly the objects cut.  Checked
 * for every class at every byte offset of its span; and so must the
 * check free makes (pcm_span_holds_object).  And the header
 * pages of descriptors: packed at the front, unwritten while none of
 * their slots is in use and given back when none is any more, read as
 * "in no span" while gone, back when a span takes a slot there; and the
 * slots through random cuts and releases.  And
 * what a span's descriptor tells free: its class's cache slot, on one line.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "heap.h"
#include "init.h"
#include "segment.h"
#include "sizeclass.h"
#include "stats.h"

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

PCM_TEST(segment_odd_inverse)
{
    for (uint32_t d = 1; d < 1u << 16; d += 2)
        PCM_CHECK(d * pcm_odd_inverse(d) == 1u, "%u * its inverse is not 1 mod 2^32", d);
    PCM_CHECK(0xffffffffu * pcm_odd_inverse(0xffffffffu) == 1u, "2^32 - 1 * its inverse is not 1");
}

PCM_TEST(segment_span_index_every_offset)
{
    for (unsigned cls = 0; cls < PCM_CLASS_COUNT; cls++) {
        struct pcm_span span = {0};
        pcm_span_set_size(&span, (uint32_t)pcm_class_size(cls));
        uint32_t size = span.object_size, capacity = (uint32_t)pcm_class_span_objects(cls);
        uint32_t bytes = (uint32_t)(pcm_class_span_pages(cls) * PCM_SPAN_PAGE_BYTES), wrong = 0;
        for (uint32_t offset = 0; offset < bytes; offset++) {
            uint32_t index = pcm_span_index(&span, offset);
            bool object = offset % size == 0 && offset / size < capacity;
            if (object ? index != offset / size : index < capacity) {
                if (wrong++ == 0)
                    PCM_CHECK(0, "class %u (%u bytes): offset %u gives index %u", cls, size, offset, index);
            }
        }
        PCM_CHECK(wrong == 0, "class %u (%u bytes): %u offsets of %u wrong", cls, size, wrong, bytes);
    }
}

/* pcm_span_holds_object, the check free makes, against a reference that
 * counts objects: for every class, with none, one, half and all of a
 * span's objects carved, at every byte from a span's length below the
 * span's start to a span's length past its end (within its segment).  The
 * span lies in a segment at an address whose low 32 bits are high, and
 * at its segment's first page after the header and at its last one. */
PCM_TEST(segment_holds_object_every_offset)
{
    /* 64-bit: a segment whose low 32 bits end at 2^32; 32-bit: one that
     * ends well below the top of the address space, so no bound wraps. */
    const uintptr_t segment = UINTPTR_MAX > 0xffffffffu ? (uintptr_t)0x7fffffc00000u : (uintptr_t)0xbfc00000u;
    for (unsigned cls = 0; cls < PCM_CLASS_COUNT; cls++) {
        struct pcm_span span = {0};
        pcm_span_set_size(&span, (uint32_t)pcm_class_size(cls));
        uint32_t size = span.object_size, capacity = (uint32_t)pcm_class_span_objects(cls);
        size_t bytes = pcm_class_span_pages(cls) * PCM_SPAN_PAGE_BYTES;
        const uintptr_t starts[] = {segment + PCM_PAGE_SIZE, segment + PCM_SEGMENT_SIZE - bytes};
        const uint32_t carved_counts[] = {0, 1, capacity / 2, capacity};
        unsigned long wrong = 0;
        for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
            pcm_span_set_start(&span, starts[k]);
            uintptr_t from = starts[k] - segment >= bytes ? starts[k] - bytes : segment;
            uintptr_t to = starts[k] + 2 * bytes <= segment + PCM_SEGMENT_SIZE ? starts[k] + 2 * bytes
                                                                              : segment + PCM_SEGMENT_SIZE;
            PCM_REQUIRE(from < starts[k] && starts[k] + bytes <= to, "class %u: no room around the span", cls);
            for (size_t c = 0; c < sizeof carved_counts / sizeof carved_counts[0]; c++) {
                pcm_span_set_carved(&span, carved_counts[c]);
                uint32_t index = 0, within = 0; /* the reference: p = start + index * size + within */
                for (uintptr_t p = from; p < to; p++) {
                    bool object = false;
                    if (p >= starts[k]) {
                        object = within == 0 && index < carved_counts[c];
                        if (++within == size) {
                            within = 0;
                            index++;
                        }
                    }
                    if (pcm_span_holds_object(&span, (const void *)p) != object && wrong++ == 0)
                        PCM_CHECK(0, "class %u (%u bytes), %u carved: %s at start + %ld", cls, size,
                                  carved_counts[c], object ? "an object rejected" : "no object accepted",
                                  (long)(p - starts[k]));
                }
            }
        }
        PCM_CHECK(wrong == 0, "class %u (%u bytes): %lu pointers judged wrong", cls, size, wrong);
    }
}

/* Which of s's header pages mincore finds resident, a bit each. */
static pcm_word_t resident_header(const struct pcm_segment *s)
{
    unsigned char vec[PCM_WORD_BITS];
    pcm_word_t bits = 0;
    if (mincore((void *)s, (size_t)s->header_pages * PCM_PAGE_SIZE, vec) != 0)
        return ~(pcm_word_t)0;
    for (unsigned k = 0; k < s->header_pages; k++)
        bits |= (pcm_word_t)(vec[k] & 1) << k;
    return bits;
}

/* The committed bytes the statistics count. */
static size_t committed_bytes(void)
{
    struct pcm_stats_totals totals;
    pcm_stats_totals_read(&totals);
    return (size_t)totals.committed_bytes;
}

/* The header pages holding slots [first, last], a bit each. */
static pcm_word_t slot_pages(size_t first, size_t last)
{
    pcm_word_t bits = 0;
    for (size_t at = offsetof(struct pcm_segment, span) + first * sizeof(struct pcm_span);
         at < offsetof(struct pcm_segment, span) + (last + 1) * sizeof(struct pcm_span); at += sizeof(struct pcm_span))
        bits |= (pcm_word_t)1 << (at >> PCM_PAGE_SHIFT) |
                (pcm_word_t)1 << ((at + sizeof(struct pcm_span) - 1) >> PCM_PAGE_SHIFT);
    return bits;
}

#define SEGMENT_SPANS_MOST (PCM_SEGMENT_PAGES / 4)

/* The descriptors in use stay packed at the front of span[]: a segment
 * full of 4-page spans writes only the header pages of its first slots;
 * the others are never written, and those of slots no span holds any
 * more go back to the OS - read as zeroes, "in no span", meanwhile. */
PCM_TEST(segment_descriptors_packed_and_unused_pages_go_back)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    bool page_sized = (size_t)sysconf(_SC_PAGESIZE) == PCM_PAGE_SIZE;
    /* A segment of its own, in no heap's list: no one else touches it. */
    size_t committed_before = committed_bytes();
    struct pcm_segment *s = pcm_segment_create(0);
    PCM_REQUIRE(s, "no segment");
    size_t begin = offsetof(struct pcm_segment, span), end = begin + sizeof s->span;
    pcm_word_t pure = 0; /* header pages holding descriptors only */
    for (unsigned k = 1; k < s->header_pages; k++)
        if (((size_t)k << PCM_PAGE_SHIFT) >= begin && ((size_t)(k + 1) << PCM_PAGE_SHIFT) <= end)
            pure |= (pcm_word_t)1 << k;
    PCM_REQUIRE(pure, "no header page holds descriptors only");

    /* A new segment has written none of them, nor counts them committed. */
    PCM_CHECK(s->descriptors_gone == pure, "new: gone 0x%lx, descriptor pages 0x%lx",
              (unsigned long)s->descriptors_gone, (unsigned long)pure);
    size_t header_bytes = PCM_ALIGN_UP(sizeof(struct pcm_segment), PCM_PAGE_SIZE);
    size_t header_committed = header_bytes - (size_t)__builtin_popcountl((unsigned long)pure) * PCM_PAGE_SIZE;
    PCM_CHECK(committed_bytes() - committed_before == header_committed,
              "new: %zu bytes counted committed, the header's pages less its descriptor pages are %zu",
              committed_bytes() - committed_before, header_committed);
    pcm_word_t resident = page_sized ? resident_header(s) : ~(pcm_word_t)0;
    bool visible = resident != ~(pcm_word_t)0;
    if (!visible)
        pcm_test_printf("  pages are not of %zu bytes, or mincore failed: residency not checked\n",
                        (size_t)PCM_PAGE_SIZE);
    else
        PCM_CHECK(!(resident & pure) && (resident & 1), "new: resident header pages 0x%lx", (unsigned long)resident);

    /* Full of spans of 16-byte objects (4 pages each): slots 1..n. */
    unsigned cls = 0;
    size_t pages = pcm_class_span_pages(cls), n = 0;
    static struct pcm_span *spans[SEGMENT_SPANS_MOST];
    while (n < SEGMENT_SPANS_MOST && (spans[n] = pcm_segment_span_create(s, cls, pages)))
        n++;
    PCM_REQUIRE(n == (PCM_SEGMENT_PAGES - s->header_pages) / pages, "%zu spans of %zu pages in a segment", n, pages);
    for (size_t i = 0; i < n; i++) {
        PCM_CHECK((size_t)(spans[i] - s->span) == i + 1, "span %zu took slot %ld", i, (long)(spans[i] - s->span));
        for (size_t page = 0; page < pages; page++)
            PCM_CHECK(pcm_span_of(s, (char *)spans[i]->start + page * PCM_PAGE_SIZE) == spans[i],
                      "span %zu: its page %zu does not lead to it", i, page);
    }
    pcm_word_t written = slot_pages(1, n) & pure;
    PCM_CHECK(s->descriptors_gone == (pure & ~written), "full: gone 0x%lx, descriptor pages 0x%lx, written 0x%lx",
              (unsigned long)s->descriptors_gone, (unsigned long)pure, (unsigned long)written);
    PCM_CHECK(pure & ~written, "%zu descriptors wrote every descriptor page", n);
    size_t written_bytes = (size_t)__builtin_popcountl((unsigned long)written) * PCM_PAGE_SIZE;
    PCM_CHECK(committed_bytes() - committed_before == header_committed + written_bytes,
              "full: %zu bytes counted committed, %zu expected", committed_bytes() - committed_before,
              header_committed + written_bytes);
    if (visible)
        PCM_CHECK(!(resident_header(s) & pure & ~written), "full: unused descriptor pages resident: 0x%lx",
                  (unsigned long)(resident_header(s) & pure & ~written));

    /* All but the last released: only its descriptor's page stays. */
    struct pcm_span *last = spans[n - 1];
    for (size_t i = 0; i + 1 < n; i++)
        pcm_segment_span_release(s, spans[i]);
    size_t released = pcm_segment_decommit_free(s);
    pcm_word_t kept = slot_pages(n, n) & pure;
    PCM_CHECK(s->descriptors_gone == (pure & ~kept), "one left: gone 0x%lx, its page 0x%lx",
              (unsigned long)s->descriptors_gone, (unsigned long)kept);
    PCM_CHECK(released == (size_t)__builtin_popcountl((unsigned long)(written & ~kept)) * PCM_PAGE_SIZE,
              "released %zu bytes", released);
    PCM_CHECK(committed_bytes() - committed_before == header_committed + written_bytes - released,
              "one left: %zu bytes counted committed, %zu expected", committed_bytes() - committed_before,
              header_committed + written_bytes - released);
    if (visible)
        PCM_CHECK(!(resident_header(s) & pure & ~kept), "one left: resident 0x%lx",
                  (unsigned long)(resident_header(s) & pure & ~kept));

    /* A released page leads to slot 0, in no span. */
    struct pcm_span *none = pcm_span_of(s, (void *)spans[0]->start);
    PCM_CHECK(none == &s->span[0] && none->class_plus1 == 0 && none->carved == 0,
              "a free page leads to descriptor %ld: class %u carved %u", (long)(none - s->span), none->class_plus1,
              none->carved);

    /* The next span takes the lowest free slot, and its page comes back. */
    struct pcm_span *again = pcm_segment_span_create(s, cls, pages);
    PCM_REQUIRE(again, "no span");
    PCM_CHECK(again == &s->span[1], "a new span took slot %ld, not 1", (long)(again - s->span));
    PCM_CHECK(!(s->descriptors_gone & slot_pages(1, 1)), "slot 1's header page still gone: 0x%lx",
              (unsigned long)s->descriptors_gone);
    PCM_CHECK(pcm_span_of(s, (void *)again->start) == again && again->class_plus1 == cls + 1 && again->pages == pages,
              "the new span's descriptor reads class %u, %u pages", again->class_plus1, again->pages);

    /* Both released: every descriptor page goes at the next decommit. */
    pcm_segment_span_release(s, again);
    pcm_segment_span_release(s, last);
    pcm_segment_decommit_free(s);
    PCM_CHECK(s->descriptors_gone == pure, "empty: gone 0x%lx, descriptor pages 0x%lx",
              (unsigned long)s->descriptors_gone, (unsigned long)pure);
    if (visible)
        PCM_CHECK(!(resident_header(s) & pure), "empty: descriptor pages resident: 0x%lx",
                  (unsigned long)(resident_header(s) & pure));
    /* A gone descriptor reads zeroes (last: the read maps the zero page,
     * which mincore counts as resident). */
    struct pcm_span *gone = &s->span[n / 2];
    PCM_CHECK(gone->class_plus1 == 0 && gone->carved == 0, "a gone descriptor reads class %u carved %u",
              gone->class_plus1, gone->carved);
    pcm_test_printf("  %u header pages, %d of descriptors only; %zu spans wrote %d of them\n", s->header_pages,
                    __builtin_popcountl((unsigned long)pure), n, __builtin_popcountl((unsigned long)written));
}

/* Spans of random classes cut and released at random in one segment, and
 * after every step: each span's pages lead to its own descriptor, which
 * covers them; no two spans share a slot; slot_used holds exactly the
 * spans' slots (and slot 0); free pages lead to slot 0; and a cut takes
 * the lowest free slot. */
PCM_TEST(segment_slots_follow_random_cuts_and_releases)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    struct pcm_segment *s = pcm_segment_create(0);
    PCM_REQUIRE(s, "no segment");
    static struct pcm_span *live[PCM_SEGMENT_PAGES];
    size_t count = 0, cuts = 0, wrong = 0;
    uint64_t rng = pcm_test_seed();
    for (unsigned step = 0; step < 20000 && !wrong; step++) {
        if (count && (pcm_test_rand(&rng) % 3 == 0 || count == PCM_SEGMENT_PAGES)) {
            size_t i = (size_t)(pcm_test_rand(&rng) % count);
            pcm_segment_span_release(s, live[i]);
            live[i] = live[--count];
        } else {
            /* mostly small classes, some of every size */
            unsigned cls = (unsigned)(pcm_test_rand(&rng) % 4 ? pcm_test_rand(&rng) % 32
                                                                 : pcm_test_rand(&rng) % PCM_CLASS_COUNT);
            size_t lowest = 1;
            while (s->slot_used[lowest / PCM_WORD_BITS] >> (lowest % PCM_WORD_BITS) & 1)
                lowest++;
            struct pcm_span *span = pcm_segment_span_create(s, cls, pcm_class_span_pages(cls));
            if (!span)
                continue; /* no room for it now */
            cuts++;
            if ((size_t)(span - s->span) != lowest && wrong++ == 0)
                PCM_CHECK(0, "step %u: a cut took slot %ld, the lowest free was %zu", step, (long)(span - s->span),
                          lowest);
            live[count++] = span;
        }
        pcm_word_t slots[PCM_SEGMENT_PAGES / PCM_WORD_BITS] = {1};
        static struct pcm_span *owner[PCM_SEGMENT_PAGES];
        memset(owner, 0, sizeof owner);
        for (size_t i = 0; i < count; i++) {
            size_t slot = (size_t)(live[i] - s->span);
            if ((slots[slot / PCM_WORD_BITS] >> (slot % PCM_WORD_BITS) & 1) && wrong++ == 0)
                PCM_CHECK(0, "step %u: two spans in slot %zu", step, slot);
            slots[slot / PCM_WORD_BITS] |= (pcm_word_t)1 << (slot % PCM_WORD_BITS);
            for (size_t page = 0; page < live[i]->pages; page++) {
                void *p = (char *)live[i]->start + page * PCM_PAGE_SIZE;
                owner[((uintptr_t)p - (uintptr_t)s) >> PCM_PAGE_SHIFT] = live[i];
                if (pcm_span_of(s, p) != live[i] && wrong++ == 0)
                    PCM_CHECK(0, "step %u: page %zu of the span in slot %zu leads elsewhere", step, page, slot);
            }
        }
        if (memcmp(slots, s->slot_used, sizeof slots) != 0 && wrong++ == 0)
            PCM_CHECK(0, "step %u: slot_used differs from the spans' slots", step);
        for (size_t page = s->header_pages; page < PCM_SEGMENT_PAGES; page++) {
            if (!owner[page] && pcm_span_of(s, (char *)s + page * PCM_PAGE_SIZE) != &s->span[0] && wrong++ == 0)
                PCM_CHECK(0, "step %u: free page %zu leads to slot %ld", step, page,
                          (long)(pcm_span_of(s, (char *)s + page * PCM_PAGE_SIZE) - s->span));
        }
    }
    PCM_CHECK(cuts > 1000, "only %zu cuts", cuts);
    while (count)
        pcm_segment_span_release(s, live[--count]);
    pcm_test_printf("  %zu cuts checked\n", cuts);
}

/* The first page of span, in s. */
static size_t first_page(const struct pcm_segment *s, const struct pcm_span *span)
{
    return (span->start - (uintptr_t)s) >> PCM_PAGE_SHIFT;
}

/* Pages [first, first + pages) of s in no span and touched: spare. */
static size_t spare_in(const struct pcm_segment *s, size_t first, size_t pages)
{
    size_t count = 0;
    for (size_t page = first; page < first + pages; page++) {
        size_t w = page / PCM_WORD_BITS;
        count += (~s->page_used[w] & s->page_touched[w]) >> (page % PCM_WORD_BITS) & 1;
    }
    return count;
}

/* What a new span's descriptor says that free reads without the lock:
 * its class's CPU-0 cache slot (the rseq push goes there), its capacity
 * (the class's), and on 64-bit builds all of it on one cache line. */
PCM_TEST(segment_span_descriptor_names_its_class_slot)
{
    pcm_free(pcm_malloc(1)); /* start-up: the heaps the slots lie in */
    struct pcm_segment *s = pcm_segment_create(0);
    PCM_REQUIRE(s, "no segment");
    PCM_CHECK((uintptr_t)s->span % 64 == 0, "span[] at byte 0x%lx of the segment",
              (unsigned long)((uintptr_t)s->span - (uintptr_t)s));
    for (unsigned cls = 0; cls < PCM_CLASS_COUNT; cls++) {
        size_t pages = pcm_class_span_pages(cls);
        struct pcm_span *span = pcm_segment_span_create(s, cls, pages);
        PCM_REQUIRE(span, "class %u: no span of %zu pages", cls, pages);
        PCM_CHECK(span->slot0 == (pcm_word_t *)&pcm_heaps[0].bins[cls].cache.half.ptr,
                  "class %u: the descriptor names slot %p", cls, (void *)span->slot0);
        PCM_CHECK(pcm_span_capacity(span) == pcm_class_span_objects(cls), "class %u: capacity %u, the class has %u",
                  cls, pcm_span_capacity(span), pcm_class_span_objects(cls));
        if (PCM_SPAN_MULTIPLY_CHECK)
            PCM_CHECK((uintptr_t)span % 64 + offsetof(struct pcm_span, start) <= 64,
                      "class %u: free's fields of the descriptor at %p straddle two lines", cls, (void *)span);
        pcm_segment_span_release(s, span);
    }
}

/* The spare count kept with the bitmaps, after each of random cuts,
 * releases, objects written (with and without huge pages, whose first
 * touch takes in free pages too), trims of a span's pages and decays:
 * always the count of pages free and touched; and no page at or above
 * s->high is used or touched. */
PCM_TEST(segment_spare_count_follows_every_change_of_the_bitmaps)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    struct pcm_segment *s = pcm_segment_create(0);
    PCM_REQUIRE(s, "no segment");
    static struct pcm_span *live[PCM_SEGMENT_PAGES];
    size_t count = 0, steps = 0, spare_seen = 0;
    bool hugepages = pcm_opts.hugepages;
    uint64_t rng = pcm_test_seed();
    for (unsigned step = 0; step < 20000; step++) {
        unsigned what = (unsigned)(pcm_test_rand(&rng) % 16);
        if (count && (what < 4 || count == PCM_SEGMENT_PAGES)) {
            size_t i = (size_t)(pcm_test_rand(&rng) % count);
            pcm_segment_span_release(s, live[i]);
            live[i] = live[--count];
        } else if (count && what < 10) {
            /* objects written over part of a span */
            struct pcm_span *span = live[pcm_test_rand(&rng) % count];
            size_t bytes = (size_t)span->pages << PCM_PAGE_SHIFT;
            size_t from = (size_t)(pcm_test_rand(&rng) % bytes), to = from + 1 + pcm_test_rand(&rng) % (bytes - from);
            pcm_opts.hugepages = what == 9;
            pcm_segment_touched(s, span->start + from, span->start + to);
            pcm_opts.hugepages = hugepages;
        } else if (count && what == 10) {
            /* a trim: pages of a span given back */
            struct pcm_span *span = live[pcm_test_rand(&rng) % count];
            size_t first = (span->start - (uintptr_t)s) >> PCM_PAGE_SHIFT;
            pcm_segment_decommit_pages(s, first, first + span->pages);
        } else if (what == 11) {
            pcm_segment_decay(s, pcm_test_rand(&rng) % 2);
        } else {
            unsigned cls = (unsigned)(pcm_test_rand(&rng) % PCM_CLASS_COUNT);
            struct pcm_span *span = pcm_segment_span_create(s, cls, pcm_class_span_pages(cls));
            if (span)
                live[count++] = span;
        }
        steps++;
        size_t want = spare_in(s, 0, PCM_SEGMENT_PAGES);
        spare_seen += want != 0;
        size_t above = s->high;
        while (above < PCM_SEGMENT_PAGES &&
               !(((s->page_used[above / PCM_WORD_BITS] | s->page_touched[above / PCM_WORD_BITS]) >>
                  (above % PCM_WORD_BITS)) & 1))
            above++;
        if (above < PCM_SEGMENT_PAGES) {
            PCM_CHECK(0, "step %u: page %zu is used or touched, above the bound %u", step, above, s->high);
            break;
        }
        if (pcm_segment_spare_pages(s) != want) {
            PCM_CHECK(0, "step %u: %zu spare pages counted, the bitmaps hold %zu", step, pcm_segment_spare_pages(s),
                      want);
            break;
        }
    }
    PCM_CHECK(spare_seen > 1000, "spare pages after only %zu of %zu steps: the test tests too little", spare_seen,
              steps);
    while (count)
        pcm_segment_span_release(s, live[--count]);
    pcm_segment_decommit_free(s);
    PCM_CHECK(pcm_segment_spare_pages(s) == 0, "%zu spare pages after all were given back", pcm_segment_spare_pages(s));
}

PCM_TEST(segment_span_goes_where_pages_are_spare)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    struct pcm_segment *s = pcm_segment_create(0);
    PCM_REQUIRE(s, "no segment");
    PCM_CHECK(pcm_segment_spare_pages(s) == 0, "a new segment has %zu spare pages", pcm_segment_spare_pages(s));

    /* Pages in order: a hole never touched, a span's worth that was
     * touched and freed, a span in use, and the fresh rest.  First fit
     * would cut the next small span in the untouched hole. */
    unsigned small = pcm_size_class(16384), big = PCM_CLASS_COUNT - 1; /* spans of 32 and 256 pages */
    size_t small_pages = pcm_class_span_pages(small), big_pages = pcm_class_span_pages(big);
    PCM_REQUIRE(small_pages * 2 <= big_pages, "spans of %zu and %zu pages", small_pages, big_pages);
    struct pcm_span *hole = pcm_segment_span_create(s, small, small_pages);
    struct pcm_span *used = pcm_segment_span_create(s, big, big_pages);
    struct pcm_span *wall = pcm_segment_span_create(s, small, small_pages);
    PCM_REQUIRE(hole && used && wall, "spans not cut");
    size_t hole_first = first_page(s, hole), used_first = first_page(s, used);
    PCM_REQUIRE(hole_first < used_first && used_first < first_page(s, wall), "spans not cut in address order");
    pcm_segment_touched(s, used->start, used->start + big_pages * PCM_SPAN_PAGE_BYTES);
    pcm_segment_span_release(s, hole);
    pcm_segment_span_release(s, used);
    PCM_CHECK(pcm_segment_spare_pages(s) == big_pages, "%zu spare pages, %zu were touched and freed",
              pcm_segment_spare_pages(s), big_pages);

    /* Every way in: the place that commits nothing new... */
    size_t first = SIZE_MAX;
    size_t fresh = pcm_segment_place_span(s, small_pages, pcm_segment_spare_pages(s), SIZE_MAX, &first);
    PCM_CHECK(fresh == 0 && first == used_first, "place: %zu fresh pages at page %zu; spare run at %zu", fresh,
              first, used_first);
    /* ...which a place already found with none cannot be beaten by... */
    PCM_CHECK(pcm_segment_place_span(s, small_pages, pcm_segment_spare_pages(s), 0, &first) == SIZE_MAX,
              "a place beat one with no fresh page");
    /* ...and first fit, when the caller knows of no spare page. */
    fresh = pcm_segment_place_span(s, small_pages, 0, SIZE_MAX, &first);
    PCM_CHECK(fresh == small_pages && first == hole_first, "first fit: %zu fresh pages at page %zu, hole at %zu",
              fresh, first, hole_first);

    struct pcm_span *span = pcm_segment_span_create(s, small, small_pages);
    PCM_REQUIRE(span, "no span");
    PCM_CHECK(first_page(s, span) == used_first, "the span went to page %zu, the spare run is at %zu",
              first_page(s, span), used_first);
    PCM_CHECK(pcm_segment_spare_pages(s) == big_pages - small_pages && spare_in(s, used_first, small_pages) == 0,
              "%zu spare pages left, %zu under the span", pcm_segment_spare_pages(s),
              spare_in(s, used_first, small_pages));

    /* The rest of the freed span, whole: no fresh page.  One page more
     * fits only in the fresh pages after the wall, all of them new. */
    size_t rest = big_pages - small_pages, wall_end = first_page(s, wall) + small_pages;
    fresh = pcm_segment_place_span(s, rest, pcm_segment_spare_pages(s), SIZE_MAX, &first);
    PCM_CHECK(fresh == 0 && first == used_first + small_pages, "%zu pages: %zu fresh at page %zu", rest, fresh,
              first);
    fresh = pcm_segment_place_span(s, rest + 1, pcm_segment_spare_pages(s), SIZE_MAX, &first);
    PCM_CHECK(fresh == rest + 1 && first == wall_end, "%zu pages: %zu fresh at page %zu, the wall ends at %zu",
              rest + 1, fresh, first, wall_end);
    /* Too long for any run: no place. */
    PCM_CHECK(pcm_segment_place_span(s, PCM_SEGMENT_PAGES, pcm_segment_spare_pages(s), SIZE_MAX, &first) == SIZE_MAX,
              "a place for a span as large as the segment");
}

/* The placement search reads the bitmaps a word at a time; this is the
 * rule it must keep, a page at a time: among the windows of `pages` free
 * pages, the first with the fewest untouched ones, or (first_fit) the
 * first window at all.  SIZE_MAX: no window. */
static size_t place_by_pages(const struct pcm_segment *s, size_t pages, bool first_fit, size_t *first)
{
    size_t best = SIZE_MAX;
    for (size_t at = s->header_pages; at + pages <= PCM_SEGMENT_PAGES; at++) {
        size_t fresh = 0, page = at;
        for (; page < at + pages; page++) {
            size_t w = page / PCM_WORD_BITS, bit = page % PCM_WORD_BITS;
            if (s->page_used[w] >> bit & 1)
                break;
            fresh += !(s->page_touched[w] >> bit & 1);
        }
        if (page < at + pages || fresh >= best)
            continue;
        best = fresh;
        *first = at;
        if (first_fit || best == 0)
            break;
    }
    return best;
}

PCM_TEST(segment_place_span_agrees_with_a_page_by_page_search)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    struct pcm_segment *s = pcm_segment_create(0);
    PCM_REQUIRE(s, "no segment");
    enum { WORDS = PCM_SEGMENT_PAGES / PCM_WORD_BITS };
    pcm_word_t used[WORDS], touched[WORDS];
    memcpy(used, s->page_used, sizeof used);
    memcpy(touched, s->page_touched, sizeof touched);
    uint32_t free_pages = s->free_pages, high = s->high;
    uint64_t rng = 0x9e3779b97f4a7c15u;
    unsigned wrong = 0, found = 0, all_spare = 0;
    for (unsigned trial = 0; trial < 20000 && wrong < 5; trial++) {
        /* Bitmaps of several shapes: pages used or touched at random, in
         * runs, or by whole words (the search's shortcuts). */
        unsigned shape = trial % 4, run = 1;
        size_t free_count = 0, top = 0;
        /* Half the trials leave the segment's top free and untouched, as
         * a segment filling up from the bottom has it (s->high). */
        size_t end = trial % 8 < 4 ? PCM_SEGMENT_PAGES : s->header_pages + (size_t)(rng >> 20) % PCM_SEGMENT_PAGES;
        for (size_t page = 0; page < PCM_SEGMENT_PAGES; page++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            unsigned r = (unsigned)(rng >> 33);
            if (page % run == 0)
                run = 1 + r % 48;
            bool is_used = page < s->header_pages ||
                           (shape == 0 ? r % 2 : shape == 1 ? r % 20 == 0 : shape == 2 ? r % 20 != 0 : page / run % 2);
            bool is_touched = shape == 3 ? (page / PCM_WORD_BITS + trial) % 3 != 0 : (r >> 8) % 5 < 2;
            if (page >= end)
                is_used = is_touched = false;
            if (is_used || is_touched)
                top = page + 1;
            pcm_word_t bit = (pcm_word_t)1 << (page % PCM_WORD_BITS);
            size_t w = page / PCM_WORD_BITS;
            s->page_used[w] = is_used ? s->page_used[w] | bit : s->page_used[w] & ~bit;
            s->page_touched[w] = is_touched ? s->page_touched[w] | bit : s->page_touched[w] & ~bit;
            free_count += !is_used;
        }
        s->free_pages = (uint32_t)free_count;
        s->high = (uint32_t)top;
        size_t pages = 1 + (size_t)(rng >> 40) % (trial % 5 == 0 ? 300 : 12);
        bool first_fit = trial % 2;
        size_t want_first = SIZE_MAX, got_first = SIZE_MAX;
        size_t want = place_by_pages(s, pages, first_fit, &want_first);
        /* (The bitmaps were written here, not the count kept with them.) */
        size_t got = pcm_segment_place_span(s, pages, first_fit ? 0 : spare_in(s, 0, PCM_SEGMENT_PAGES), SIZE_MAX,
                                            &got_first);
        found += want != SIZE_MAX;
        all_spare += !first_fit && want == 0 && pages > 1; /* (first_spare_window's answer) */
        if (got != want || (want != SIZE_MAX && got_first != want_first)) {
            wrong++;
            PCM_CHECK(0, "trial %u (%zu pages, %s): %zu fresh at page %zu, the rule says %zu at %zu", trial, pages,
                      first_fit ? "first fit" : "fewest fresh", got, got_first, want, want_first);
        }
    }
    memcpy(s->page_used, used, sizeof used);
    memcpy(s->page_touched, touched, sizeof touched);
    s->free_pages = free_pages;
    s->high = high;
    PCM_CHECK(found > 1000, "only %u trials had a place: the shapes test too little", found);
    PCM_CHECK(all_spare > 500, "only %u trials had a window of spare pages alone", all_spare);
}
