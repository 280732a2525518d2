/*
 * tests/unit/sizeclass.c - the size-class table and pcm_size_class.
 *
 * Re-derives the whole table from the rules written in sizeclass.h and
 * sizeclass.c and checks every request size from 0 to PCM_SMALL_MAX (the
 * lookup table of the sizes up to 1 KiB against the arithmetic too).
 * Calls nothing from the C library (runs freestanding too).
 */
#include "harness.h"

#include "sizeclass.h"

/* The class sizes by the rule: 16..128 in 16s, then 8 per doubling, and
 * from 1 KiB 9: 2^k + 2^k / 16, then 2^k + j * 2^k / 8 for j = 1..8. */
static size_t derived_class_size(unsigned cls)
{
    if (cls < 8)
        return 16 * (size_t)(cls + 1);
    if (cls < 32) {
        unsigned doubling = (cls - 8) / 8, step = (cls - 8) % 8;
        size_t base = (size_t)128 << doubling;
        return base + (step + 1) * (base / 8);
    }
    unsigned doubling = (cls - 32) / 9, step = (cls - 32) % 9;
    size_t base = (size_t)1024 << doubling;
    return step == 0 ? base + base / 16 : base + step * (base / 8);
}

/* The span rule of sizeclass.c, applied afresh. */
static size_t derived_span_pages(size_t size)
{
    if (size > PCM_SPAN_SINGLE_ABOVE) /* one object, on whole pages */
        return (size + PCM_SPAN_PAGE_BYTES - 1) / PCM_SPAN_PAGE_BYTES;
    size_t want = PCM_SPAN_MIN_OBJECTS * size;
    if (want < PCM_SPAN_MIN_BYTES)
        want = PCM_SPAN_MIN_BYTES;
    size_t pages = (want + PCM_SPAN_PAGE_BYTES - 1) / PCM_SPAN_PAGE_BYTES;
    while ((pages * PCM_SPAN_PAGE_BYTES) % size > pages * PCM_SPAN_PAGE_BYTES / PCM_SPAN_TAIL_DIVISOR)
        pages++;
    return pages;
}

PCM_TEST(sizeclass_table_shape)
{
    PCM_CHECK(pcm_class_size(0) == 16, "first class %zu", pcm_class_size(0));
    PCM_CHECK(pcm_class_size(PCM_CLASS_COUNT - 1) == PCM_SMALL_MAX, "last class %zu",
              pcm_class_size(PCM_CLASS_COUNT - 1));
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        size_t size = pcm_class_size(c);
        PCM_CHECK(size % 16 == 0, "class %u size %zu not a multiple of 16", c, size);
        if (c > 0)
            PCM_CHECK(size > pcm_class_size(c - 1), "class %u size %zu not above %zu", c, size,
                      pcm_class_size(c - 1));
        PCM_CHECK(size == derived_class_size(c), "class %u size %zu, rule says %zu", c, size,
                  derived_class_size(c));
        if (c > 0 && size > 64 && size <= 128)
            PCM_CHECK(size - pcm_class_size(c - 1) == 16, "class %u: step between 64 and 128", c);
    }
}

PCM_TEST(sizeclass_lookup_exhaustive)
{
    unsigned reported = 0;
    size_t worst_waste = 0, worst_request = 1; /* as a fraction waste/request */
    for (size_t s = 0; s <= PCM_SMALL_MAX; s++) {
        unsigned c = pcm_size_class(s);
        /* The table (up to PCM_CLASS_TABLE_MAX) and the arithmetic agree. */
        if (s >= 1 && s <= PCM_CLASS_TABLE_MAX && pcm_class_of_step[(s - 1) >> 4] != c && reported++ < 10)
            PCM_CHECK(false, "size %zu: class %u by the table, %u by pcm_size_class", s,
                      pcm_class_of_step[(s - 1) >> 4], c);
        if (s > PCM_CLASS_TABLE_MAX && pcm_size_class_above_1k(s) != c && reported++ < 10)
            PCM_CHECK(false, "size %zu: class %u by pcm_size_class, %u by the arithmetic", s, c,
                      pcm_size_class_above_1k(s));
        bool ok = c < PCM_CLASS_COUNT && pcm_class_size(c) >= s
                  && (c == 0 || pcm_class_size(c - 1) < s);
        if (!ok) {
            if (reported++ < 10)
                PCM_CHECK(ok, "size %zu -> class %u (%zu), not the smallest class >= it", s, c,
                          c < PCM_CLASS_COUNT ? pcm_class_size(c) : 0);
            continue;
        }
        size_t waste = pcm_class_size(c) - s;
        if (s > 128) {
            /* (class - request) / request <= 1/8 */
            if (waste * 8 > s && reported++ < 10)
                PCM_CHECK(waste * 8 <= s, "size %zu -> %zu wastes more than 1/8", s,
                          pcm_class_size(c));
            if (waste * worst_request > worst_waste * s) {
                worst_waste = waste;
                worst_request = s;
            }
        } else if (s > 0) {
            PCM_CHECK(waste < 16, "size %zu -> %zu: more than the 16-byte step", s,
                      pcm_class_size(c));
        }
    }
    PCM_CHECK(reported == 0, "%u sizes mapped wrongly", reported);
    /* The worst case is one byte past the last doubling of eight, 513 ->
     * 576: 63/513, just under 1/8.  From 1 KiB on, the class just above
     * each power of two keeps the step right past it to 1/16, so the
     * worst there is one byte past 2^k + 2^k / 8, e.g. 1153 -> 1280:
     * 127/1153, just under 1/9. */
    PCM_CHECK(worst_request == 513 && worst_waste == 63, "worst waste above 128: %zu/%zu",
              worst_waste, worst_request);
}

/* A power of two from 1 KiB and a header of up to a sixteenth of it (SQLite
 * asks for 1024 + 8 and 4096 + 8 bytes) wastes at most 1/16, where the
 * eight classes of a doubling alone took the next eighth (1152 for 1032). */
PCM_TEST(sizeclass_power_of_two_and_a_header)
{
    for (size_t power = 1024; power < PCM_SMALL_MAX; power *= 2) {
        for (size_t header = 1; header <= power / 16; header += header < 64 ? 1 : 64) {
            size_t size = pcm_class_size(pcm_size_class(power + header));
            PCM_CHECK(size == power + power / 16, "%zu + %zu bytes -> class of %zu", power, header, size);
        }
        size_t just_past = pcm_class_size(pcm_size_class(power + power / 16 + 1));
        PCM_CHECK(just_past == power + power / 8, "%zu + %zu + 1 bytes -> class of %zu", power, power / 16,
                  just_past);
        PCM_CHECK(pcm_class_size(pcm_size_class(power)) == power, "%zu bytes: not a class of its own", power);
    }
}

PCM_TEST(sizeclass_spans)
{
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        size_t size = pcm_class_size(c);
        size_t pages = pcm_class_span_pages(c);
        size_t bytes = pages * PCM_SPAN_PAGE_BYTES;
        unsigned objects = pcm_class_span_objects(c);
        PCM_CHECK(pages == derived_span_pages(size), "class %u (%zu): %zu pages, rule says %zu",
                  c, size, pages, derived_span_pages(size));
        PCM_CHECK(objects == bytes / size, "class %u: %u objects, %zu fit", c, objects,
                  bytes / size);
        PCM_CHECK(objects >= 1, "class %u: no object fits", c);
        PCM_CHECK(size <= PCM_SPAN_SINGLE_ABOVE ? objects >= PCM_SPAN_MIN_OBJECTS : objects == 1,
                  "class %u (%zu): %u objects", c, size, objects);
        PCM_CHECK((c >= PCM_CLASS_BIG_FIRST) == (size > PCM_SPAN_SINGLE_ABOVE), "class %u (%zu): big from %u", c,
                  size, PCM_CLASS_BIG_FIRST);
        PCM_CHECK(bytes >= PCM_SPAN_MIN_BYTES, "class %u: span of %zu bytes", c, bytes);
        PCM_CHECK(bytes <= PCM_SPAN_CAP_BYTES, "class %u: span of %zu bytes", c, bytes);
        size_t tail = bytes - (size_t)objects * size;
        if (objects == 1) /* a big class: its object on whole pages */
            PCM_CHECK(tail < PCM_SPAN_PAGE_BYTES && tail * 100 <= bytes * 15, "class %u: tail %zu of %zu", c,
                      tail, bytes);
        else
            PCM_CHECK(tail * PCM_SPAN_TAIL_DIVISOR <= bytes && tail * 8 <= bytes, "class %u: tail %zu of %zu", c,
                      tail, bytes);
    }
}
