/*
 * tests/unit/large_cache.c - the cache of freed large mappings
 * (src/large_cache.c): it never holds more than PCMALLOC_LARGE_CACHE,
 * its mappings are unmapped a delay (the shorter of PCMALLOC_PURGE_DELAY
 * and PCMALLOC_LARGE_CACHE_DELAY) after they were last used with no
 * malloc_trim, malloc_trim(0) says 1 when it unmapped some and 0
 * when nothing was left, and a request larger than every cached mapping
 * grows the largest one instead of mapping afresh.
 *
 * The cache's own counters (pcm_large_cache_bytes, the statistics' "large
 * cached") are cross-checked with the kernel: mincore says whether each
 * freed mapping is still mapped (where it can tell: qemu-user for a 32-bit
 * guest keeps unmapped guest pages reserved, and then says so and the
 * counters alone are checked), and the resident set drops by what
 * malloc_trim unmapped.  Options are set in pcm_opts directly, as
 * PCMALLOC_LARGE_CACHE and the two delays would set them.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "init.h"
#include "large_cache.h"
#include "layout.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* The mapping of a large object from pcm_malloc (page alignment): its
 * header page comes first. */
static size_t map_bytes_of(size_t size)
{
    return PCM_ALIGN_UP(PCM_PAGE_SIZE + size, PCM_PAGE_SIZE);
}

static void *header_of(void *p)
{
    return (char *)p - PCM_PAGE_SIZE;
}

/* 1: the page at p is mapped, 0: it is not, -1: mincore failed otherwise. */
static int page_mapped(void *p)
{
    unsigned char vec;
    if (mincore(p, PCM_PAGE_SIZE, &vec) == 0)
        return 1;
    return errno == ENOMEM ? 0 : -1;
}

/* Bytes of [p, p + bytes) resident now, by mincore (0 if not mapped). */
static size_t resident_in(void *p, size_t bytes)
{
    static unsigned char vec[64 * MIB / 4096];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (bytes + page - 1) / page;
    if (pages > sizeof vec || mincore(p, bytes, vec) != 0)
        return 0;
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += (vec[i] & 1) * page;
    return resident;
}

/* Does mincore tell an unmapped page from a mapped one here? */
static bool mincore_sees_unmapping(void)
{
    static int known = -1;
    if (known < 0) {
        void *p = mmap(NULL, PCM_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        known = p != MAP_FAILED && page_mapped(p) == 1 && munmap(p, PCM_PAGE_SIZE) == 0 && page_mapped(p) == 0;
        if (!known)
            pcm_test_printf("  mincore cannot see unmapped pages here (qemu-user?): the kernel cross-check is "
                            "skipped, the cache's counters are checked alone\n");
    }
    return known == 1;
}

static uint64_t now_ms(void)
{
    return pcm_test_clock_ns() / 1000000u;
}

/* Options for one test, and back after it. */
static struct pcm_options saved_opts;

/* delay_ms: the cache's, so both PCMALLOC_PURGE_DELAY and
 * PCMALLOC_LARGE_CACHE_DELAY (the shorter of the two decays it). */
static void set_cache(unsigned mib, unsigned delay_ms)
{
    pcm_free(pcm_malloc(1)); /* initialised, so pcm_opts is read and final */
    saved_opts = pcm_opts;
    pcm_opts.large_cache_mib = mib;
    pcm_opts.purge_delay_ms = delay_ms;
    pcm_opts.large_cache_delay_ms = delay_ms;
    pcm_malloc_trim(0);
}

static void restore_cache(void)
{
    pcm_malloc_trim(0);
    pcm_opts = saved_opts;
}

#define BOUND_OBJECTS 40

PCM_TEST(large_cache_never_holds_more_than_its_bound)
{
    const unsigned bound_mib = 8;
    const size_t bound = bound_mib * MIB;
    set_cache(bound_mib, 3600000); /* no decay during the test */
    uint64_t rng = pcm_test_seed() * 2 + 1;
    static void *objects[BOUND_OBJECTS];
    static size_t sizes[BOUND_OBJECTS];
    for (unsigned i = 0; i < BOUND_OBJECTS; i++) {
        /* 256 KiB + 1 .. 2 MiB: most fit the 2 MiB a single mapping may
         * take of an 8 MiB bound; every fifth is too big to be kept. */
        sizes[i] = i % 5 == 4 ? 3 * MIB : PCM_SMALL_MAX + 1 + (size_t)(pcm_test_rand(&rng) % (1792 * KIB));
        objects[i] = pcm_malloc(sizes[i]);
        PCM_REQUIRE(objects[i], "malloc(%zu) failed", sizes[i]);
        memset(objects[i], (int)i, sizes[i]); /* resident, as a real buffer */
    }
    bool kernel = mincore_sees_unmapping();
    size_t most = 0;
    for (unsigned i = 0; i < BOUND_OBJECTS; i++) {
        pcm_free(objects[i]);
        size_t cached = pcm_large_cache_bytes();
        unsigned count = pcm_large_cache_count();
        if (cached > most)
            most = cached;
        PCM_CHECK(cached <= bound, "after %u frees the cache holds %zu bytes, bound %zu", i + 1,
                  cached, bound);
        PCM_CHECK(count <= PCM_LARGE_CACHE_SLOTS, "%u mappings cached", count);
        if (!kernel)
            continue;
        /* The kernel's view: the freed mappings still mapped are the
         * cache, and only they can be resident. */
        size_t mapped = 0, resident = 0;
        for (unsigned j = 0; j <= i; j++) {
            if (page_mapped(header_of(objects[j])) == 1) {
                mapped += map_bytes_of(sizes[j]);
                resident += resident_in(header_of(objects[j]), map_bytes_of(sizes[j]));
            }
        }
        PCM_CHECK(mapped == cached, "after %u frees %zu bytes of freed mappings are mapped, the cache counts %zu",
                  i + 1, mapped, cached);
        PCM_CHECK(resident <= bound, "after %u frees %zu bytes of freed mappings are resident, bound %zu", i + 1,
                  resident, bound);
    }
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    PCM_CHECK(t.large_cached_bytes == pcm_large_cache_bytes() && t.large_cached == pcm_large_cache_count(),
              "statistics say %lu bytes in %lu mappings, the cache %zu in %u", (unsigned long)t.large_cached_bytes,
              (unsigned long)t.large_cached, pcm_large_cache_bytes(), pcm_large_cache_count());
    /* The test means something only if the cache filled up. */
    PCM_CHECK(most > bound / 2, "the cache never held more than %zu bytes of %zu", most, bound);
    pcm_test_printf("  bound %zu MiB: at most %zu KiB cached over %d frees\n", bound / MIB, most / KIB,
                    BOUND_OBJECTS);

    /* A bound of 0 keeps nothing. */
    pcm_opts.large_cache_mib = 0;
    void *p = pcm_malloc(MIB);
    PCM_REQUIRE(p, "malloc(1 MiB) failed");
    pcm_malloc_trim(0);
    pcm_free(p);
    PCM_CHECK(pcm_large_cache_bytes() == 0, "PCMALLOC_LARGE_CACHE=0 kept %zu bytes", pcm_large_cache_bytes());
    restore_cache();
}

/* A MiB written and freed, which the (empty) cache keeps: its address
 * (NULL: malloc failed). */
static char *cache_a_written_mib(void)
{
    char *kept = pcm_malloc(MIB);
    if (kept) {
        memset(kept, 0x5a, MIB);
        pcm_free(kept);
        PCM_CHECK(pcm_large_cache_bytes() == map_bytes_of(MIB), "freed 1 MiB, the cache holds %zu bytes",
                  pcm_large_cache_bytes());
    }
    return kept;
}

/* Frees a written MiB into the cache with PCMALLOC_PURGE_DELAY `purge` and
 * PCMALLOC_LARGE_CACHE_DELAY `large` ms, and calls malloc and free every
 * quarter of the shorter until the cache is empty: checks that the mapping
 * went no sooner than that delay after its free, and within 50 of them. */
static void check_decay(unsigned purge, unsigned large)
{
    unsigned delay = purge < large ? purge : large;
    set_cache(64, delay);
    pcm_opts.purge_delay_ms = purge;
    pcm_opts.large_cache_delay_ms = large;
    bool kernel = mincore_sees_unmapping();
    uint64_t freed_at = now_ms();
    char *kept = cache_a_written_mib();
    PCM_REQUIRE(kept, "malloc(1 MiB) failed");
    PCM_CHECK(!kernel || page_mapped(header_of(kept)) == 1, "the freed mapping was not kept");
    /* Ticks run on large allocations and frees: these are aligned beyond
     * a segment (no cached mapping serves them) and too big for the cache
     * (over a quarter of 64 MiB), so what it holds is `kept` alone. */
    const size_t tick_size = 20 * MIB, tick_alignment = 2 * PCM_SEGMENT_SIZE;
    uint64_t released_at = 0;
    for (int round = 0; round < 200 && !released_at; round++) {
        pcm_test_sleep_ms(delay / 4);
        pcm_free(pcm_aligned_alloc(tick_alignment, tick_size));
        if (pcm_large_cache_bytes() == 0)
            released_at = now_ms();
    }
    PCM_REQUIRE(released_at, "purge delay %u, large cache delay %u: the cached mapping was still there %d ms after "
                "its free", purge, large, 200 * (int)delay / 4);
    PCM_CHECK(released_at - freed_at >= delay, "purge delay %u, large cache delay %u: released %llu ms after its "
              "free, before %u ms", purge, large, (unsigned long long)(released_at - freed_at), delay);
    PCM_CHECK(pcm_large_cache_count() == 0, "%u mappings still cached", pcm_large_cache_count());
    PCM_CHECK(!kernel || page_mapped(header_of(kept)) == 0, "the cache is empty but the mapping is still mapped");
    pcm_test_printf("  purge delay %u ms, large cache delay %u ms: the cached mapping was unmapped %llu ms after "
                    "its free\n", purge, large, (unsigned long long)(released_at - freed_at));
    restore_cache();
}

PCM_TEST(large_cache_decays_without_malloc_trim)
{
    const unsigned delay = 50;
    check_decay(delay, delay);

    /* A mapping that is taken and put back again and again stays: between
     * its free and the next malloc less than a delay passes, so at most one
     * tick runs (ticks are a delay apart).  A round whose sleep overran the
     * delay on a busy machine proves nothing and is not judged. */
    const unsigned long_delay = 400;
    set_cache(64, long_delay);
    char *reused = pcm_malloc(MIB);
    PCM_REQUIRE(reused, "malloc(1 MiB) failed");
    pcm_free(reused);
    uint64_t put_at = now_ms();
    unsigned judged = 0;
    for (int round = 0; round < 12; round++) {
        pcm_test_sleep_ms(20);
        bool in_time = now_ms() - put_at < long_delay / 2; /* margin for a preempted free */
        char *again = pcm_malloc(MIB);
        PCM_REQUIRE(again, "malloc(1 MiB) failed");
        if (in_time) {
            judged++;
            PCM_CHECK(again == reused, "round %d: the mapping in use a moment ago was given back (%p, then %p)",
                      round, (void *)reused, (void *)again);
        }
        reused = again;
        pcm_free(again);
        put_at = now_ms();
    }
    PCM_CHECK(judged > 0, "every round overran the %u ms delay", long_delay);
    restore_cache();
}

/* The large cache has a delay of its own, shorter by default than the
 * pages' (a buffer reused in a loop is taken again at once, and one that
 * is not should not stay resident for a second): whichever of the two is
 * shorter decays it. */
PCM_TEST(the_large_cache_delay_decays_it_before_the_purge_delay)
{
    check_decay(3600000, 50);
}

PCM_TEST(a_shorter_purge_delay_decays_the_large_cache_too)
{
    check_decay(50, 3600000);
}

/* After a quiet period - no large call, refill or flush for a whole
 * delay - the first call's tick unmaps every cached mapping at once: each
 * was put at a call, so it has sat there a delay at least.  (Without the
 * quiet rule that tick is the first after the put and keeps it: a mapping
 * goes at the second tick after its put.) */
PCM_TEST(a_quiet_period_unmaps_the_cache_at_the_next_call)
{
    const unsigned delay = 50;
    set_cache(64, delay);
    bool kernel = mincore_sees_unmapping();
    char *kept = cache_a_written_mib();
    PCM_REQUIRE(kept, "malloc(1 MiB) failed");
    pcm_test_sleep_ms(delay + delay / 2);
    /* One call, which no cached mapping serves (see above). */
    void *tick = pcm_aligned_alloc(2 * PCM_SEGMENT_SIZE, 20 * MIB);
    PCM_REQUIRE(tick, "the over-aligned allocation failed");
    PCM_CHECK(pcm_large_cache_bytes() == 0 && pcm_large_cache_count() == 0,
              "%zu bytes in %u mappings still cached at the first call after %u quiet ms", pcm_large_cache_bytes(),
              pcm_large_cache_count(), delay + delay / 2);
    pcm_free(tick); /* (too big to be cached; its mapping may have reused kept's addresses) */
    PCM_CHECK(!kernel || page_mapped(header_of(kept)) == 0, "the cache is empty but the mapping is still mapped");
    restore_cache();
}

/* A request larger than every cached mapping grows the largest one: no
 * new mapping, the old pages (still resident) serve as far as they go,
 * and calloc still gives zeros throughout. */
PCM_TEST(a_larger_request_grows_a_cached_mapping)
{
    set_cache(64, 3600000);
    bool kernel = mincore_sees_unmapping();
    for (int zeroed = 0; zeroed < 2; zeroed++) {
        char *small = pcm_malloc(MIB), *other = pcm_malloc(512 * KIB);
        PCM_REQUIRE(small && other, "malloc(1 MiB), malloc(512 KiB) failed");
        memset(small, 0x5a, MIB);
        memset(other, 0x5b, 512 * KIB);
        pcm_free(other);
        pcm_free(small);
        struct pcm_stats_totals before, after;
        pcm_stats_totals_read(&before);
        PCM_CHECK(before.large_cached == 2, "%lu mappings cached, not 2", (unsigned long)before.large_cached);
        size_t size = 3 * MIB;
        char *big = zeroed ? pcm_calloc(1, size) : pcm_malloc(size);
        PCM_REQUIRE(big, "%s of 3 MiB failed", zeroed ? "calloc" : "malloc");
        pcm_stats_totals_read(&after);
        /* The 1 MiB mapping, the larger of the two, was taken and grown. */
        PCM_CHECK(after.large_objects == before.large_objects, "large mappings %lu -> %lu: a new one was made",
                  (unsigned long)before.large_objects, (unsigned long)after.large_objects);
        PCM_CHECK(after.large_cached == 1 && pcm_large_cache_bytes() == map_bytes_of(512 * KIB),
                  "%lu mappings, %zu bytes cached: not the 512 KiB one alone", (unsigned long)after.large_cached,
                  pcm_large_cache_bytes());
        PCM_CHECK(pcm_malloc_usable_size(big) >= size, "usable size %zu of a 3 MiB object",
                  pcm_malloc_usable_size(big));
        if (kernel)
            PCM_CHECK(resident_in(header_of(big), MIB) >= MIB / 2, "%zu bytes of the grown mapping's first MiB "
                      "resident: its old pages did not serve", resident_in(header_of(big), MIB));
        size_t nonzero = 0;
        for (size_t i = 0; zeroed && i < size; i++)
            nonzero += big[i] != 0;
        PCM_CHECK(nonzero == 0, "calloc of 3 MiB on a reused mapping: %zu bytes not zero", nonzero);
        memset(big, 0x77, size);
        pcm_free(big);
        pcm_malloc_trim(0);
    }
    restore_cache();
}

PCM_TEST(malloc_trim_says_whether_it_unmapped_cached_mappings)
{
    set_cache(64, 3600000);
    bool kernel = mincore_sees_unmapping();
    PCM_CHECK(pcm_malloc_trim(0) == 0, "malloc_trim(0) right after malloc_trim(0) released something");

    enum { COUNT = 8 };
    static char *objects[COUNT];
    for (unsigned i = 0; i < COUNT; i++) {
        objects[i] = pcm_malloc(2 * MIB);
        PCM_REQUIRE(objects[i], "malloc(2 MiB) failed");
        memset(objects[i], 0x33, 2 * MIB);
    }
    for (unsigned i = 0; i < COUNT; i++)
        pcm_free(objects[i]);
    size_t cached = pcm_large_cache_bytes();
    PCM_CHECK(cached == COUNT * map_bytes_of(2 * MIB), "%zu bytes cached after %d frees of 2 MiB", cached, COUNT);
    size_t before = pcm_test_resident_bytes();
    int released = pcm_malloc_trim(0);
    size_t after = pcm_test_resident_bytes();
    PCM_CHECK(released == 1, "malloc_trim(0) returned %d with %zu bytes of large mappings cached", released, cached);
    PCM_CHECK(pcm_large_cache_bytes() == 0 && pcm_large_cache_count() == 0, "%zu bytes in %u mappings still cached",
              pcm_large_cache_bytes(), pcm_large_cache_count());
    for (unsigned i = 0; kernel && i < COUNT; i++)
        PCM_CHECK(page_mapped(header_of(objects[i])) == 0, "mapping %u still mapped after malloc_trim", i);
    PCM_CHECK(before > after && before - after >= cached * 3 / 4,
              "resident %zu KiB before malloc_trim, %zu KiB after; %zu KiB were cached", before / KIB, after / KIB,
              cached / KIB);
    pcm_test_printf("  malloc_trim(0) unmapped %zu KiB of cached mappings: resident %zu -> %zu KiB\n", cached / KIB,
                    before / KIB, after / KIB);
    PCM_CHECK(pcm_malloc_trim(0) == 0, "malloc_trim(0) with nothing left returned 1");
    restore_cache();
}

/* A buffer of `start` bytes filled with a pattern, grown by realloc to
 * `grown`; the pattern must survive.  The grown buffer, or NULL (a failure
 * recorded) if malloc or realloc failed. */
static unsigned char *grow_filled(size_t start, size_t grown)
{
    unsigned char *p = pcm_malloc(start);
    PCM_CHECK(p, "malloc(%zu) failed", start);
    if (!p)
        return NULL;
    for (size_t i = 0; i < start; i++)
        p[i] = (unsigned char)(i * 7 + 1);
    unsigned char *q = pcm_realloc(p, grown);
    PCM_CHECK(q, "realloc(%zu -> %zu) failed", start, grown);
    if (!q) {
        pcm_free(p);
        return NULL;
    }
    size_t lost = SIZE_MAX;
    for (size_t i = 0; i < start && lost == SIZE_MAX; i++)
        if (q[i] != (unsigned char)(i * 7 + 1))
            lost = i;
    PCM_CHECK(lost == SIZE_MAX, "realloc(%zu -> %zu) lost byte %zu", start, grown, lost);
    return q;
}

/* Allocate, write and free a large object of `size` bytes, which the
 * empty cache keeps: its mapping's header (NULL if malloc failed). */
static void *cache_one(size_t size)
{
    void *p = pcm_malloc(size);
    PCM_CHECK(p, "malloc(%zu) failed", size);
    if (!p)
        return NULL;
    memset(p, 0x5a, size);
    pcm_free(p);
    PCM_CHECK(pcm_large_cache_count() == 1, "freed %zu bytes, %u mappings cached", size, pcm_large_cache_count());
    return header_of(p);
}

PCM_TEST(growing_buffer_takes_a_cached_mapping_up_to_2_mib)
{
    set_cache(64, 3600000);
    /* A page-sized buffer that grows takes the freed 1 MiB mapping at
     * once, then grows in place inside it: the copies through the small
     * classes (9, 18, 36 KiB...) are gone. */
    void *header = cache_one(MIB);
    unsigned char *p = grow_filled(5000, 9000);
    PCM_REQUIRE(header && p, "no buffer to check");
    PCM_CHECK(header_of(p) == header, "5000 -> 9000 bytes: %p, not the cached mapping's object %p", (void *)p,
              (void *)((char *)header + PCM_PAGE_SIZE));
    PCM_CHECK(pcm_large_cache_count() == 0, "%u mappings still cached", pcm_large_cache_count());
    PCM_CHECK(pcm_malloc_usable_size(p) == MIB, "usable %zu in the adopted 1 MiB mapping", pcm_malloc_usable_size(p));
    unsigned char *q = pcm_realloc(p, 512 * KIB);
    PCM_CHECK(q == p, "growing inside the adopted mapping moved it: %p -> %p", (void *)p, (void *)q);
    pcm_free(q ? q : p);
    PCM_CHECK(pcm_large_cache_count() == 1, "the adopted mapping did not go back to the cache");

    /* A bigger cached mapping stays for a big buffer: a short string must
     * not hold its pages. */
    pcm_malloc_trim(0);
    header = cache_one(3 * MIB);
    p = grow_filled(5000, 9000);
    PCM_REQUIRE(header && p, "no buffer to check");
    PCM_CHECK(header_of(p) != header && pcm_large_cache_count() == 1,
              "5000 -> 9000 bytes took the cached 3 MiB mapping");
    pcm_free(p);

    /* A buffer under a page moves through the small classes. */
    pcm_malloc_trim(0);
    header = cache_one(MIB);
    p = grow_filled(2000, 3000);
    PCM_REQUIRE(header && p, "no buffer to check");
    PCM_CHECK(header_of(p) != header && pcm_large_cache_count() == 1, "2000 -> 3000 bytes took a cached mapping");
    pcm_free(p);
    restore_cache();
}

/* A slot's word holds a mapping's pages below its header's alignment, a
 * map granule (layout.h): on 32-bit, 64 KiB, so at most 65,535 pages.  A
 * mapping of 300 MiB fits a bound of 4095 MiB but not the word: it is
 * unmapped, not cached with its page count spilling into its address.
 * On 64-bit it is cached. */
PCM_TEST(large_cache_keeps_no_mapping_its_slot_cannot_describe)
{
    set_cache(4095, 3600000);
    const size_t size = 300 * MIB;
    char *p = pcm_malloc(size);
    PCM_REQUIRE(p, "malloc(300 MiB) failed");
    p[size - 1] = 1;
    pcm_free(p);
    size_t cached = pcm_large_cache_bytes();
    if ((map_bytes_of(size) >> PCM_PAGE_SHIFT) > PCM_MAP_GRANULE - 1) /* the slot's mask of pages */
        PCM_CHECK(cached == 0, "a 300 MiB mapping cached (%zu bytes) past its slot's %zu pages", cached,
                  PCM_MAP_GRANULE - 1);
    else
        PCM_CHECK(cached == map_bytes_of(size), "a 300 MiB mapping not cached under a 4095 MiB bound: %zu bytes",
                  cached);
    /* A mapping taken back must be whole and usable either way. */
    char *q = pcm_malloc(size);
    PCM_REQUIRE(q, "malloc(300 MiB) again failed");
    q[0] = 2;
    q[size - 1] = 3;
    PCM_CHECK(q[0] == 2 && q[size - 1] == 3, "the 300 MiB object does not keep its bytes");
    pcm_free(q);
    restore_cache();
}
