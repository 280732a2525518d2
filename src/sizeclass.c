/*
 * sizeclass.c - the table of small size classes and their spans.
 *
 * Must never happen here: anything computed at run time (the table is
 * const data, ready before the first malloc, shared by all threads without
 * a thought), or a change to one column without the rules below: the
 * unit test re-derives every entry from them and fails on any difference.
 *
 * Class sizes: see sizeclass.h (16-byte steps to 128, then 8 per doubling,
 * and from 1 KiB 9: one just above the power of two).
 *
 * Span of a class of `size` bytes (4 KiB pages):
 *   objects = 8 up to 16 KiB, 1 above (the big classes)
 *   pages   = 8 objects: ceil(max(16 KiB, 8 * size) / 4 KiB), then one
 *             more page at a time while the tail (pages * 4 KiB mod size)
 *             exceeds 1/16 of the span;
 *             1 object: ceil(size / 4 KiB), a tail under a page.
 * Why:
 *   - 8 objects: one span refill serves several allocations, and a
 *     tail is always smaller than one object, so it is below 1/8 of the
 *     span before the tail rule even applies;
 *   - >= 16 KiB: tiny classes get hundreds of objects (1024 of 16 B) per
 *     refill, and the span metadata is amortised over them;
 *   - one object above 16 KiB: such a span goes back to its segment as
 *     soon as its object does (heap.c: span_returned_locked), and a refill
 *     of a big class that would leave more than PCM_BIG_IDLE_BYTES of big
 *     objects cached sends the others home first (heap.h:
 *     pcm_heap_refill_plan).  So the pages of a freed big object serve
 *     the next span of any class.  With 8 objects to a span, the pages of
 *     every object a class ever had out at once stay with that class: a
 *     program of assorted buffers holds the sum of each class's own peak,
 *     not the peak of their sum.  Mixed sizes at one thread (medians of 5,
 *     peak RSS): 8-object spans up to 64 KiB, 39.6 MB; up to 32 KiB, 38.2;
 *     up to 16 KiB, 37.0 (glibc 30.2, mimalloc 36.9); its objects up to
 *     64 KiB alone: 8.0, 7.0 and 5.7 MB (glibc 3.8, mimalloc 6.8).  Above
 *     64 KiB, 8-object spans (4 to 7 above 128 KiB) had kept an idle
 *     object of each of the 18 classes on every CPU (41.9 MB).  The cost
 *     is a span cut and released for each object beyond what the cache
 *     holds (heap.c gives the caches of big classes up to 64 KiB room for
 *     PCM_BIG_CLASS_CACHE_BYTES);
 *   - tail <= 1/16 (6.25%), half the 12.5% rounding bound: for requests
 *     above 128 bytes at least 15/16 * 8/9 = 83% of a span's bytes then
 *     hold requested bytes, and the rule costs little: it grows only four
 *     spans (of 1664, 2304, 2816 and 3328-byte objects) by one or two pages.
 *     A big class's object takes whole pages: those of 17408, 18432,
 *     22528, 26624 and 34816 bytes leave 2 or 3 KiB of their last page
 *     unused (at most 15%, of 17408); the rest are multiples of 4 KiB.
 * The largest span is 64 pages (256 KiB: one object of the last class);
 * every span is a whole number of 4 KiB pages, at least 4.
 * The entries below are the output of a throw-away script applying these
 * rules; tests/unit/sizeclass.c applies them again and compares.
 */
#include "sizeclass.h"

const struct pcm_size_class pcm_size_classes[PCM_CLASS_COUNT] = {
    /* {size, span pages, span objects} */
    /* 16 .. 128: 16-byte steps */
    {16, 4, 1024}, {32, 4, 512}, {48, 4, 341}, {64, 4, 256}, {80, 4, 204}, {96, 4, 170},
    {112, 4, 146}, {128, 4, 128},
    /* (128, 256]: steps of 16 */
    {144, 4, 113}, {160, 4, 102}, {176, 4, 93}, {192, 4, 85}, {208, 4, 78}, {224, 4, 73},
    {240, 4, 68}, {256, 4, 64},
    /* (256, 512]: steps of 32 */
    {288, 4, 56}, {320, 4, 51}, {352, 4, 46}, {384, 4, 42}, {416, 4, 39}, {448, 4, 36},
    {480, 4, 34}, {512, 4, 32},
    /* (512, 1024]: steps of 64 */
    {576, 4, 28}, {640, 4, 25}, {704, 4, 23}, {768, 4, 21}, {832, 4, 19}, {896, 4, 18},
    {960, 4, 17}, {1024, 4, 16},
    /* (1024, 2048]: 1088 (a power of two and a little), then steps of 128 */
    {1088, 4, 15}, {1152, 4, 14}, {1280, 4, 12}, {1408, 4, 11}, {1536, 4, 10}, {1664, 5, 12},
    {1792, 4, 9}, {1920, 4, 8}, {2048, 4, 8},
    /* (2048, 4096]: 2176 (a power of two and a little), then steps of 256 */
    {2176, 5, 9}, {2304, 6, 10}, {2560, 5, 8}, {2816, 7, 10}, {3072, 6, 8}, {3328, 9, 11},
    {3584, 7, 8}, {3840, 8, 8}, {4096, 8, 8},
    /* (4096, 8192]: 4352 (a power of two and a little), then steps of 512 */
    {4352, 9, 8}, {4608, 9, 8}, {5120, 10, 8}, {5632, 11, 8}, {6144, 12, 8}, {6656, 13, 8},
    {7168, 14, 8}, {7680, 15, 8}, {8192, 16, 8},
    /* (8192, 16384]: 8704 (a power of two and a little), then steps of 1024 */
    {8704, 17, 8}, {9216, 18, 8}, {10240, 20, 8}, {11264, 22, 8}, {12288, 24, 8}, {13312, 26, 8},
    {14336, 28, 8}, {15360, 30, 8}, {16384, 32, 8},
    /* (16384, 32768]: 17408 (a power of two and a little), then steps of 2048; one object a
     * span from here on */
    {17408, 5, 1}, {18432, 5, 1}, {20480, 5, 1}, {22528, 6, 1}, {24576, 6, 1}, {26624, 7, 1},
    {28672, 7, 1}, {30720, 8, 1}, {32768, 8, 1},
    /* (32768, 65536]: 34816 (a power of two and a little), then steps of 4096 */
    {34816, 9, 1}, {36864, 9, 1}, {40960, 10, 1}, {45056, 11, 1}, {49152, 12, 1}, {53248, 13, 1},
    {57344, 14, 1}, {61440, 15, 1}, {65536, 16, 1},
    /* (65536, 131072]: 69632 (a power of two and a little), then steps of 8192 */
    {69632, 17, 1}, {73728, 18, 1}, {81920, 20, 1}, {90112, 22, 1}, {98304, 24, 1},
    {106496, 26, 1}, {114688, 28, 1}, {122880, 30, 1}, {131072, 32, 1},
    /* (131072, 262144]: 139264 (a power of two and a little), then steps of 16384 */
    {139264, 34, 1}, {147456, 36, 1}, {163840, 40, 1}, {180224, 44, 1}, {196608, 48, 1},
    {212992, 52, 1}, {229376, 56, 1}, {245760, 60, 1}, {262144, 64, 1},
};

/* The class of each 16-byte step of requests up to PCM_CLASS_TABLE_MAX:
 * entry i for requests of 16 * i + 1 .. 16 * (i + 1) bytes (classes are
 * multiples of 16, so a whole step rounds up to one class).  Written out,
 * like the table above; tests/unit/sizeclass.c checks that every entry is
 * the smallest class its sizes fit. */
const uint8_t pcm_class_of_step[PCM_CLASS_TABLE_MAX / 16] = {
    /* 16 .. 128 */
    0, 1, 2, 3, 4, 5, 6, 7,
    /* 144 .. 256 */
    8, 9, 10, 11, 12, 13, 14, 15,
    /* 272 .. 512: two steps a class */
    16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23,
    /* 528 .. 1024: four */
    24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 27, 27, 27, 27,
    28, 28, 28, 28, 29, 29, 29, 29, 30, 30, 30, 30, 31, 31, 31, 31,
};
