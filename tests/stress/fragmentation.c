/*
 * tests/stress/fragmentation.c - long-lived small objects interleaved with
 * short-lived ones, then the short-lived freed (bench/fragmentation.c's
 * workload): what stays resident after malloc_trim(0), against the live
 * bytes.
 *
 * One thread allocates OBJECTS objects of 16..512 bytes (every byte
 * written), keeps one in KEEP at random and frees the rest, then calls
 * malloc_trim(0).  pcmalloc does not move objects, but a trim gives back
 * every page of a span whose objects are all free, so the bound it must
 * meet is
 *
 *     written and resident <= the pages a kept object lies on
 *                             + the headers of the segments + 1 MiB
 *
 * "written and resident" being the pages of every segment of every heap
 * that mincore() finds resident and that pcmalloc ever wrote (headers, and
 * pages objects were cut from that no decommit has given back since: the
 * segments' page_touched bits); whatever the emulator or an earlier test
 * holds does not count (1 MiB: slack, never needed so far).  Pages resident
 * that pcmalloc never wrote are printed apart: with transparent huge pages
 * on "always" (Debian's kernels, so the whole-machine VM runs), the first
 * write to a 2 MiB region of a segment may commit all of it, and decommit
 * gives back only pages objects were cut from - so there they are not
 * bounded, and elsewhere they must stay within the slack.  A trim that left empty spans, or
 * their free pages, committed breaks it: at one in 100 kept about half of
 * the peak is in spans with no kept object, and most of the rest in pages
 * of them with none (the bound was 122 MiB of 284 MiB before trims gave
 * those back, 41 MiB after).  It also prints the growth of
 * the resident set (/proc/self/statm) against the live bytes - the ratio
 * bench/fragmentation.c tables for every allocator - and the 4 KiB pages
 * where a kept object starts, a floor for any allocator that does not move
 * objects.  Every kept object is checked byte by byte before it is freed.
 *
 * The bound does not read the resident set, so it holds under qemu-user
 * and TSan too.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "hardening.h"
#include "heap.h"
#include "init.h"
#include "segment.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#define OBJECTS (sizeof(void *) == 8 ? 500000ul : 250000ul)
#define MIN_SIZE 16u
#define MAX_SIZE 512u
#define MARGIN ((size_t)1 << 20)
#define KIB(b) ((unsigned long)((b) >> 10))

static size_t growth(size_t before)
{
    size_t now = pcm_test_resident_bytes();
    return now > before ? now - before : 0;
}

struct resident {
    size_t written;   /* header pages, and pages objects were cut from */
    size_t unwritten; /* the others */
};

/* What of segment s is resident (pages of PCM_PAGE_SIZE, which the caller
 * checked is the system's). */
static struct resident resident_in(const struct pcm_segment *s)
{
    static unsigned char vec[PCM_SEGMENT_PAGES];
    struct resident r = {0, 0};
    if (mincore((void *)s, PCM_SEGMENT_SIZE, vec) != 0)
        return r;
    for (size_t page = 0; page < PCM_SEGMENT_PAGES; page++) {
        if (!(vec[page] & 1))
            continue;
        bool touched = (s->page_touched[page / PCM_WORD_BITS] >> (page % PCM_WORD_BITS)) & 1;
        if (page < s->header_pages || touched)
            r.written += PCM_PAGE_SIZE;
        else
            r.unwritten += PCM_PAGE_SIZE;
    }
    return r;
}

/* Whether transparent huge pages are on for every anonymous mapping. */
static bool huge_pages_always(void)
{
    char text[128];
    pcm_test_read_file("/sys/kernel/mm/transparent_hugepage/enabled", text, sizeof text);
    return strstr(text, "[always]") != NULL;
}

static int by_value(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts values[0..n) and returns how many distinct ones there are. */
static size_t distinct(uintptr_t *values, size_t n)
{
    qsort(values, n, sizeof *values, by_value);
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += i == 0 || values[i] != values[i - 1];
    return count;
}

static unsigned char fill_byte(size_t index)
{
    return (unsigned char)(index * 167 + 13);
}

/* Frees enough 1 KiB objects (a class the workload does not use) to
 * overflow this CPU's cache: a flush, which runs a decay tick when one is
 * due. */
static void burst_of_frees(void)
{
    enum { BURST = 256 };
    void *objects[BURST];
    for (unsigned i = 0; i < BURST; i++)
        objects[i] = pcm_malloc(1024);
    for (unsigned i = 0; i < BURST; i++)
        pcm_free(objects[i]);
}

/* Appends to pages[*n] the page of every object waiting in any cache or
 * outgoing list of every ready heap (nothing else allocates meanwhile:
 * one thread). */
static void cached_pages(uintptr_t *pages, size_t *n, size_t room)
{
    for (unsigned h = 0; h < pcm_heap_count; h++) {
        if (!pcm_heap_is_ready(h))
            continue;
        struct pcm_bin *bins[2] = {pcm_heaps[h].bins, pcm_heaps[h].outgoing};
        unsigned counts[2] = {PCM_CLASS_COUNT, PCM_OUTGOING_CLASSES};
        for (unsigned b = 0; b < 2; b++)
            for (unsigned c = 0; c < counts[b]; c++)
                for (void *obj = (void *)bins[b][c].cache.half.ptr; pcm_chain_more(obj) && *n < room;
                     obj = pcm_link_next(obj, *(pcm_word_t *)obj))
                    pages[(*n)++] = (uintptr_t)obj / PCM_PAGE_SIZE;
    }
}

static void fragmentation(unsigned keep, bool by_decay)
{
    if ((size_t)sysconf(_SC_PAGESIZE) != PCM_PAGE_SIZE) {
        pcm_test_printf("  pages of %ld bytes, not %lu: the page-by-page reading does not apply; skipped\n",
                        sysconf(_SC_PAGESIZE), (unsigned long)PCM_PAGE_SIZE);
        return;
    }
    uint64_t seed = pcm_test_seed() ^ keep, rng = seed | 1;
    size_t objects = (size_t)pcm_test_scale(OBJECTS);
    size_t most_kept = objects / keep + 1;
    size_t cache_room = (size_t)pcm_heap_count * (PCM_CLASS_COUNT + PCM_OUTGOING_CLASSES) * 1024;
    size_t array_bytes = objects * sizeof(void *) + most_kept * (2 * sizeof(size_t) + 3 * sizeof(uintptr_t)) +
                         cache_room * sizeof(uintptr_t);
    char *arrays = pcm_test_shared_alloc(array_bytes);
    PCM_REQUIRE(arrays, "cannot map %lu bytes of arrays", (unsigned long)array_bytes);
    memset(arrays, 0, array_bytes); /* resident before the baseline */
    unsigned char **all = (unsigned char **)arrays;
    size_t *kept_index = (size_t *)(all + objects), *kept_size = kept_index + most_kept;
    uintptr_t *pages = (uintptr_t *)(kept_size + most_kept), *on = pages + most_kept; /* on: 2 * most_kept + cache_room */

    pcm_malloc_trim(0); /* what an earlier test left is not counted */
    size_t before = pcm_test_resident_bytes(), kept = 0, live = 0;
    for (size_t i = 0; i < objects; i++) {
        size_t size = MIN_SIZE + (size_t)(pcm_test_rand(&rng) % (MAX_SIZE - MIN_SIZE + 1));
        all[i] = pcm_malloc(size);
        PCM_REQUIRE(all[i], "malloc(%lu) failed at object %lu (seed %llu)", (unsigned long)size,
                    (unsigned long)i, (unsigned long long)seed);
        memset(all[i], fill_byte(i), size);
        if (pcm_test_rand(&rng) % keep == 0 && kept < most_kept) {
            kept_index[kept] = i;
            kept_size[kept++] = size;
            live += size;
        }
    }
    size_t peak = growth(before);
    for (size_t i = 0, k = 0; i < objects; i++) {
        if (k < kept && kept_index[k] == i)
            k++;
        else
            pcm_free(all[i]);
    }
    if (by_decay) {
        /* No trim: three decay periods (of 100 ms) pass, each ended by a
         * burst of frees - a span must stay idle for a whole one. */
        unsigned saved_delay = pcm_opts.purge_delay_ms;
        pcm_opts.purge_delay_ms = 100;
        for (int tick = 0; tick < 3; tick++) {
            pcm_test_sleep_ms(150);
            burst_of_frees();
        }
        pcm_opts.purge_delay_ms = saved_delay;
    } else {
        pcm_malloc_trim(0);
    }
    size_t after = growth(before);

    /* The bound: pages a kept object lies on (objects of at most 512
     * bytes: one or two pages each) or one waiting in a cache (none after
     * a trim; 1 KiB ones, the bursts', lie on at most two), segment
     * headers. */
    for (size_t k = 0; k < kept; k++) {
        uintptr_t p = (uintptr_t)all[kept_index[k]];
        on[2 * k] = p / PCM_PAGE_SIZE;
        on[2 * k + 1] = (p + kept_size[k] - 1) / PCM_PAGE_SIZE;
        pages[k] = p >> 12; /* its first page: the floor is a lower bound */
    }
    size_t in_use = 2 * kept, cached_from = in_use;
    cached_pages(on, &in_use, 2 * kept + cache_room / 2);
    for (size_t i = cached_from, end = in_use; i < end && in_use < 2 * kept + cache_room; i++)
        on[in_use++] = on[i] + 1; /* (over-counts by a page where an object does not cross one) */
    size_t kept_pages = distinct(on, in_use) * PCM_PAGE_SIZE;
    size_t headers = 0, committed = 0, unwritten = 0, segments = 0;
    for (unsigned h = 0; h < pcm_heap_count; h++) {
        if (!pcm_heap_is_ready(h))
            continue;
        for (struct pcm_segment *s = pcm_heaps[h].segments; s; s = s->next, segments++) {
            headers += (size_t)s->header_pages * PCM_PAGE_SIZE;
            struct resident r = resident_in(s);
            committed += r.written;
            unwritten += r.unwritten;
        }
    }
    bool thp_always = huge_pages_always();
    size_t floor = distinct(pages, kept) * 4096;
    size_t bound = kept_pages + headers + MARGIN;
    const char *how = by_decay ? "decay" : "malloc_trim";
    pcm_test_printf("  1 in %u kept: %lu objects, live %lu KiB; resident set growth at the peak %lu KiB, after the "
                    "free and %s %lu KiB = %lu.%02lu x live; written and resident in %lu segments %lu KiB, "
                    "bound %lu KiB (pages a kept or cached object lies on %lu KiB, headers %lu KiB); resident but "
                    "never written %lu KiB (transparent huge pages: %s); pages where a kept object starts %lu KiB\n",
                    keep, (unsigned long)objects, KIB(live), KIB(peak), how, KIB(after),
                    (unsigned long)(after / (live ? live : 1)), (unsigned long)(after * 100 / (live ? live : 1) % 100),
                    (unsigned long)segments, KIB(committed), KIB(bound), KIB(kept_pages), KIB(headers),
                    KIB(unwritten), thp_always ? "always" : "not always", KIB(floor));
    PCM_CHECK(committed <= bound, "1 in %u kept: %lu KiB written and resident in segments after %s, above the bound "
              "%lu KiB", keep, KIB(committed), how, KIB(bound));
    PCM_CHECK(thp_always || unwritten <= MARGIN, "1 in %u kept: %lu KiB resident in segments that pcmalloc never wrote",
              keep, KIB(unwritten));
    PCM_CHECK(committed > 0, "mincore found nothing resident in the segments");

    for (size_t k = 0; k < kept; k++) {
        unsigned char *p = all[kept_index[k]];
        for (size_t b = 0; b < kept_size[k]; b++)
            if (p[b] != fill_byte(kept_index[k])) {
                PCM_CHECK(0, "kept object %lu (%lu bytes) byte %lu overwritten", (unsigned long)kept_index[k],
                          (unsigned long)kept_size[k], (unsigned long)b);
                break;
            }
        pcm_free(p);
    }
    pcm_test_shared_free(arrays, array_bytes);
}

PCM_TEST(fragmentation_keep_1_in_100)
{
    fragmentation(100, false);
}

PCM_TEST(fragmentation_keep_1_in_100_decay)
{
    fragmentation(100, true);
}

PCM_TEST(fragmentation_keep_1_in_10)
{
    fragmentation(10, false);
}
