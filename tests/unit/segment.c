/*
 * tests/unit/segment.c - the span arithmetic of segment.h that free's
 * check rests on: pcm_span_index must give every object's index exactly,
 * and for every other offset in a span an index no object of the span has,
 * so that "index < carved" alone accepts exactly the objects cut.  Checked
 * for every class at every byte offset of its span.  Calls nothing from
 * the C library (runs freestanding too).
 */
#include "harness.h"

#include "segment.h"
#include "sizeclass.h"

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
