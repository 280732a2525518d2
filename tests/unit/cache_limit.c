/*
 * tests/unit/cache_limit.c - each CPU cache's limit follows its use
 * (heap.h: pcm_heap_flushed_locked): it starts small, grows while a
 * program's batches go out and come back in more than it holds, until a
 * batch fits and rounds of malloc and free no longer flush (also with a
 * pause between the two halves), but stays near its start for a class
 * used at random; and falls back to its start when objects only come
 * back (a big class's never does); and it never holds more than 64 KiB
 * of a class (but 4 objects of one up to 64 KiB, and
 * PCM_BIG_CLASS_CACHE_BYTES of a big class up to 64 KiB), or one object
 * of a bigger one; and a refill of a big class sends the other big
 * classes' objects home when they come to more than PCM_BIG_IDLE_BYTES
 * (one of each class up to 64 KiB stays), so their pages serve it, after
 * taking a cached object of a class up to twice its size if there is one
 * (the rest of that cache left there).  The thread
 * is pinned, so one heap's cache serves it throughout; both paths run it
 * (the suite runs with rseq on and off).
 */
#include "harness.h"

#include "pcmalloc.h"

#include "fast_path.h"
#include "heap.h"
#include "percpu_cache.h"
#include "sizeclass.h"
#include "stats.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#define OBJECT_SIZE 64u
/* Below the class's most (1024) by more than a refill's batch (64): the
 * objects a refill leaves over after a round of mallocs, and the round's
 * frees, then fit the cache whatever the leftover is. */
#define BATCH 900u
#define REFILL_MOST 64u
#define ROUNDS 8u
#define MANY 20000u

static void *objects[MANY];

static uint64_t stamp(unsigned i)
{
    return 0x11A17000000ull | i;
}

/* objects[i]: a malloc of `size` bytes, written whole. */
static void allocate_one(unsigned i, size_t size)
{
    objects[i] = pcm_malloc(size);
    PCM_REQUIRE(objects[i], "out of memory at object %u", i);
    for (unsigned w = 0; w < size / 8; w++)
        ((uint64_t *)objects[i])[w] = stamp(i) + w;
}

/* objects[i] (of `size` bytes) checked whole, then freed. */
static void release_one(unsigned i, size_t size)
{
    for (unsigned w = 0; w < size / 8; w++)
        PCM_REQUIRE(((uint64_t *)objects[i])[w] == stamp(i) + w, "object %u (%p) word %u overwritten", i, objects[i],
                    w);
    pcm_free(objects[i]);
}

/* malloc n objects of `size` bytes and write each whole. */
static void allocate(unsigned n, size_t size)
{
    for (unsigned i = 0; i < n; i++)
        allocate_one(i, size);
}

/* Check each of the n objects of `size` bytes whole, then free them in
 * order. */
static void release(unsigned n, size_t size)
{
    for (unsigned i = 0; i < n; i++)
        release_one(i, size);
}

/* Start pcmalloc up (the path chosen, the shapes written), then pin the
 * thread to the first CPU it may run on, so that one heap's cache serves
 * it throughout; its affinity before goes to *saved.  False (a failure
 * recorded) if it cannot. */
static bool pin_to_first_cpu(cpu_set_t *saved)
{
    pcm_free(pcm_malloc(1));
    int first, last;
    pcm_test_allowed_cpus(&first, &last);
    if (first < 0 || sched_getaffinity(0, sizeof *saved, saved) != 0 || !pcm_test_pin(first)) {
        pcm_test_fail(__FILE__, __LINE__, "pinned", "cannot pin to the first allowed CPU (%d)", first);
        return false;
    }
    return true;
}

/* Objects taken out of caches so that a test starts from empty ones (an
 * earlier test may have left objects there), freed at its end. */
#define HOLD_MOST 512u

struct held {
    void *objects[HOLD_MOST];
    unsigned count;
};

static struct held held;

/* Empty the caches of classes first..end-1 of h, the thread's CPU's heap,
 * into `held`.  False (a failure recorded) if they hold too many. */
static bool hold_cached(struct pcm_heap *h, unsigned first, unsigned end)
{
    held.count = 0;
    for (unsigned c = first; c < end; c++)
        while (held.count < HOLD_MOST && pcm_bin_listed_hint(&h->bins[c]))
            held.objects[held.count++] = pcm_malloc(pcm_class_size(c));
    for (unsigned c = first; c < end; c++) {
        if (pcm_bin_listed_hint(&h->bins[c])) {
            pcm_test_fail(__FILE__, __LINE__, "emptied", "the caches of %zu to %zu bytes hold more than %u objects",
                          pcm_class_size(first), pcm_class_size(end - 1), HOLD_MOST);
            return false;
        }
    }
    return true;
}

static void free_held(void)
{
    while (held.count)
        pcm_free(held.objects[--held.count]);
}

PCM_TEST(cache_limit_grows_to_a_batch_and_shrinks_when_objects_only_come_back)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    unsigned cls = pcm_size_class(OBJECT_SIZE);
    const struct pcm_bin_shape shape = pcm_bin_shapes[cls];
    PCM_REQUIRE(shape.start < BATCH && BATCH + REFILL_MOST <= shape.limit, "the %u-byte cache: start %u, most %u",
                OBJECT_SIZE, shape.start, shape.limit);
    struct pcm_heap *h = pcm_heap_current();
    struct pcm_bin *bin = &h->bins[cls];

    /* Rounds of a batch out and back: the limit doubles on each flush
     * that ends a long streak of refills, so by the last round the batch
     * fits. */
    uint32_t before = pcm_bin_limit(bin);
    pcm_word_t flushes = 0;
    for (unsigned round = 0; round < ROUNDS; round++) {
        flushes = h->stats.flushes;
        allocate(BATCH, OBJECT_SIZE);
        release(BATCH, OBJECT_SIZE);
        flushes = h->stats.flushes - flushes;
    }
    pcm_test_printf("  %s path: limit %u at the start, %u after %u rounds of %u, %lu flushes in the last\n",
                    pcm_fast_path_name(), before, pcm_bin_limit(bin), ROUNDS, BATCH, (unsigned long)flushes);
    PCM_CHECK(before <= shape.start, "limit %u before any flush, above the start %u", before, shape.start);
    PCM_CHECK(pcm_bin_limit(bin) >= BATCH, "limit %u after %u rounds of %u", pcm_bin_limit(bin), ROUNDS, BATCH);
    PCM_CHECK(flushes == 0, "%lu flushes in the last round of %u", (unsigned long)flushes, BATCH);

    /* Many out, then all back: flushes come in a row with no refill
     * between, and the limit halves down to its start. */
    allocate(MANY, OBJECT_SIZE);
    release(MANY, OBJECT_SIZE);
    pcm_test_printf("  limit %u after %u objects freed in a row\n", pcm_bin_limit(bin), MANY);
    PCM_CHECK(pcm_bin_limit(bin) == shape.start, "limit %u after %u frees in a row, not the start %u",
              pcm_bin_limit(bin), MANY, shape.start);

    /* And it grows again. */
    for (unsigned round = 0; round < ROUNDS; round++) {
        allocate(BATCH, OBJECT_SIZE);
        release(BATCH, OBJECT_SIZE);
    }
    PCM_CHECK(pcm_bin_limit(bin) >= BATCH, "limit %u after %u more rounds of %u", pcm_bin_limit(bin), ROUNDS, BATCH);
    sched_setaffinity(0, sizeof saved, &saved);
}

/* The same batches, with a pause after each half: a producer and a
 * consumer taking turns on one CPU, each for a time slice.  The flushes
 * come long after the refills began, but the refills came in long
 * streaks, each moving what the cache could not hold: the cache grows
 * still (timed from the refills alone, it stayed at its start, and
 * xmalloc with 4 threads on one CPU lost 14 %). */
#define PAUSE_NS 2000000

static void pause_briefly(void)
{
    struct timespec nap = {0, PAUSE_NS};
    while (nanosleep(&nap, &nap) != 0)
        ;
}

PCM_TEST(cache_grows_for_batches_that_come_back_after_a_pause)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    unsigned cls = pcm_size_class(OBJECT_SIZE);
    struct pcm_heap *h = pcm_heap_current();
    struct pcm_bin *bin = &h->bins[cls];
    /* (from its start: an earlier test may have grown it) */
    pcm_bin_set_limit(bin, pcm_bin_shapes[cls].start);
    for (unsigned round = 0; round < ROUNDS; round++) {
        allocate(BATCH, OBJECT_SIZE);
        pause_briefly();
        release(BATCH, OBJECT_SIZE);
        pause_briefly();
    }
    pcm_test_printf("  %s path: limit %u after %u rounds of %u with pauses of %d ms (start %u)\n",
                    pcm_fast_path_name(), pcm_bin_limit(bin), ROUNDS, BATCH, PAUSE_NS / 1000000,
                    pcm_bin_shapes[cls].start);
    PCM_CHECK(pcm_bin_limit(bin) >= BATCH, "limit %u after %u rounds of %u with pauses", pcm_bin_limit(bin), ROUNDS,
              BATCH);
    pcm_bin_set_limit(bin, pcm_bin_shapes[cls].start); /* (as it found it, for the tests after it) */
    sched_setaffinity(0, sizeof saved, &saved);
}

/* Objects of 16..400 bytes replaced at random, each written whole and
 * checked before its free (larson's server at one thread): each class's
 * cache drifts between empty and full, its flushes long after its
 * refills, so the caches stay near their starts (1.34 to 1.52 times
 * their bytes in 7 runs here).  When every flush after a refill grew its
 * cache, a run like this ended with 2.1 times. */
#define RANDOM_LIVE 1000u
#define RANDOM_REPLACEMENTS 3000000u
#define RANDOM_MIN 16u
#define RANDOM_MAX 400u

static size_t random_sizes[RANDOM_LIVE];

PCM_TEST(caches_of_classes_used_at_random_stay_near_their_starts)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    struct pcm_heap *h = pcm_heap_current();
    unsigned first = pcm_size_class(RANDOM_MIN), end = pcm_size_class(RANDOM_MAX) + 1;
    uint64_t rng = pcm_test_seed() | 1;
    for (unsigned i = 0; i < RANDOM_LIVE; i++) {
        random_sizes[i] = RANDOM_MIN + (size_t)(pcm_test_rand(&rng) % (RANDOM_MAX - RANDOM_MIN + 1));
        allocate_one(i, random_sizes[i]);
    }
    unsigned long replacements = pcm_test_scale(RANDOM_REPLACEMENTS);
    for (unsigned long n = 0; n < replacements; n++) {
        unsigned i = (unsigned)(pcm_test_rand(&rng) % RANDOM_LIVE);
        release_one(i, random_sizes[i]);
        random_sizes[i] = RANDOM_MIN + (size_t)(pcm_test_rand(&rng) % (RANDOM_MAX - RANDOM_MIN + 1));
        allocate_one(i, random_sizes[i]);
    }
    uint64_t limits = 0, starts = 0, cached = 0;
    for (unsigned c = first; c < end; c++) {
        limits += (uint64_t)pcm_bin_limit(&h->bins[c]) * pcm_class_size(c);
        starts += (uint64_t)pcm_bin_shapes[c].start * pcm_class_size(c);
        cached += pcm_cache_depth_of(pcm_load_relaxed(&h->bins[c].cache.half.ptr)) * pcm_class_size(c);
    }
    pcm_test_printf("  %s path: the limits of the %u classes of %u..%u bytes come to %lu KiB (%lu KiB at their "
                    "starts), %lu KiB cached, after %lu replacements among %u objects\n",
                    pcm_fast_path_name(), end - first, RANDOM_MIN, RANDOM_MAX, (unsigned long)(limits / 1024),
                    (unsigned long)(starts / 1024), (unsigned long)(cached / 1024), replacements, RANDOM_LIVE);
    PCM_CHECK(4 * limits <= 7 * starts, "limits of %lu KiB, more than 1.75 times their starts' %lu KiB",
              (unsigned long)(limits / 1024), (unsigned long)(starts / 1024));
    for (unsigned i = 0; i < RANDOM_LIVE; i++)
        release_one(i, random_sizes[i]);
    sched_setaffinity(0, sizeof saved, &saved);
}

/* A big class's cache never shrinks (heap.h): rounds of batches larger
 * than it holds, taken out and given back, grow it to its most and leave
 * it there.  It shrank as often as it grew, and stayed at one object. */
#define BIG_BATCH_SIZE 20000u
#define BIG_BATCH 100u
#define BIG_ROUNDS 8u

PCM_TEST(big_class_cache_keeps_its_room_under_batches_it_cannot_hold)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    unsigned cls = pcm_size_class(BIG_BATCH_SIZE);
    const struct pcm_bin_shape shape = pcm_bin_shapes[cls];
    PCM_REQUIRE(cls >= PCM_CLASS_BIG_FIRST && shape.limit > 2 * shape.start && shape.limit < BIG_BATCH,
                "the %u-byte cache: start %u, most %u", BIG_BATCH_SIZE, shape.start, shape.limit);
    struct pcm_bin *bin = &pcm_heap_current()->bins[cls];
    for (unsigned round = 0; round < BIG_ROUNDS; round++) {
        allocate(BIG_BATCH, BIG_BATCH_SIZE);
        release(BIG_BATCH, BIG_BATCH_SIZE);
    }
    pcm_test_printf("  %s path: limit %u after %u rounds of %u objects of %u bytes (start %u, most %u)\n",
                    pcm_fast_path_name(), pcm_bin_limit(bin), BIG_ROUNDS, BIG_BATCH, BIG_BATCH_SIZE, shape.start,
                    shape.limit);
    PCM_CHECK(pcm_bin_limit(bin) == shape.limit, "limit %u after %u rounds of %u, not its most %u",
              pcm_bin_limit(bin), BIG_ROUNDS, BIG_BATCH, shape.limit);
    sched_setaffinity(0, sizeof saved, &saved);
}

/* Every class's cache is bounded in bytes - 64 KiB, or 4 objects of a
 * class up to 64 KiB, or PCM_BIG_CLASS_CACHE_BYTES of a big class up to 64 KiB,
 * or one object of a class above that - so a CPU's caches together stay
 * under PER_CPU_MOST however many classes a program uses; a floor of 4
 * objects for every class had let them hold 16 MiB.
 * And a pinned thread that frees a handful of 200 KiB objects keeps one of
 * them cached, not more. */
#define CLASS_MOST (64u * 1024)
#define FLOOR_OBJECTS 4u
#define PER_CPU_MOST ((13u * 1024 + 512) * 1024)
#define BIG_SIZE (200u * 1024)
#define BIG_COUNT 6u

PCM_TEST(cache_holds_at_most_64_kib_of_a_class_or_one_bigger_object)
{
    pcm_free(pcm_malloc(1)); /* initialised: the shapes written */
    uint64_t per_cpu = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        const struct pcm_bin_shape shape = pcm_bin_shapes[c];
        uint64_t size = pcm_class_size(c), most = size > CLASS_MOST ? size : CLASS_MOST;
        if (size <= CLASS_MOST && FLOOR_OBJECTS * size > most)
            most = FLOOR_OBJECTS * size;
        if (c >= PCM_CLASS_BIG_FIRST && size <= CLASS_MOST && PCM_BIG_CLASS_CACHE_BYTES > most)
            most = PCM_BIG_CLASS_CACHE_BYTES;
        PCM_CHECK(shape.start >= 1 && shape.start <= shape.limit, "class %u (%lu bytes): start %u, most %u", c,
                  (unsigned long)size, shape.start, shape.limit);
        PCM_CHECK(shape.limit * size <= most, "class %u (%lu bytes): a cache holds %u objects, %lu bytes", c,
                  (unsigned long)size, shape.limit, (unsigned long)(shape.limit * size));
        per_cpu += shape.limit * size;
    }
    pcm_test_printf("  a CPU's caches hold at most %lu KiB\n", (unsigned long)(per_cpu / 1024));
    PCM_CHECK(per_cpu <= PER_CPU_MOST, "a CPU's caches hold up to %lu KiB", (unsigned long)(per_cpu / 1024));

    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    unsigned cls = pcm_size_class(BIG_SIZE);
    struct pcm_bin *bin = &pcm_heap_current()->bins[cls];
    void *big[BIG_COUNT];
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < BIG_COUNT; i++) {
            big[i] = pcm_malloc(BIG_SIZE);
            PCM_REQUIRE(big[i], "out of memory at object %u", i);
            memset(big[i], (int)(0x40 + i), BIG_SIZE);
        }
        for (unsigned i = 0; i < BIG_COUNT; i++) {
            const unsigned char *bytes = big[i];
            PCM_REQUIRE(bytes[0] == 0x40 + i && bytes[BIG_SIZE - 1] == 0x40 + i, "object %u (%p) overwritten", i,
                        big[i]);
            pcm_free(big[i]);
        }
        pcm_word_t depth = pcm_cache_depth_of(pcm_load_relaxed(&bin->cache.half.ptr));
        PCM_CHECK(depth <= 1, "%s path, round %u: %lu objects of %u bytes cached after %u freed", pcm_fast_path_name(),
                  round, (unsigned long)depth, BIG_SIZE, BIG_COUNT);
    }
    sched_setaffinity(0, sizeof saved, &saved);
}

/* A class up to 64 KiB holds at least 4 objects once its traffic asks:
 * a program that takes 3 buffers of 40,000 bytes and gives them back, again
 * and again, runs on the cache alone after a few rounds (with one cached
 * object, as the 64 KiB budget alone allows, every round refilled and
 * flushed). */
#define MEDIUM_SIZE 40000u
#define MEDIUM_BATCH 3u

PCM_TEST(cache_of_a_class_up_to_64_kib_holds_a_few_objects)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    unsigned cls = pcm_size_class(MEDIUM_SIZE);
    PCM_CHECK(pcm_bin_shapes[cls].limit >= FLOOR_OBJECTS, "the %u-byte cache holds %u objects at most", MEDIUM_SIZE,
              pcm_bin_shapes[cls].limit);
    struct pcm_heap *h = pcm_heap_current();
    pcm_word_t refills = 0, flushes = 0;
    unsigned char *buffers[MEDIUM_BATCH];
    for (unsigned round = 0; round < 200; round++) {
        if (round == 100) {
            refills = h->stats.refills;
            flushes = h->stats.flushes;
        }
        for (unsigned i = 0; i < MEDIUM_BATCH; i++) {
            buffers[i] = pcm_malloc(MEDIUM_SIZE);
            PCM_REQUIRE(buffers[i], "out of memory at round %u", round);
            memset(buffers[i], (int)(round * MEDIUM_BATCH + i), MEDIUM_SIZE);
        }
        for (unsigned i = 0; i < MEDIUM_BATCH; i++) {
            unsigned char want = (unsigned char)(round * MEDIUM_BATCH + i);
            PCM_REQUIRE(buffers[i][0] == want && buffers[i][MEDIUM_SIZE / 2] == want &&
                            buffers[i][MEDIUM_SIZE - 1] == want,
                        "round %u: buffer %u (%p) overwritten", round, i, (void *)buffers[i]);
            pcm_free(buffers[i]);
        }
    }
    refills = h->stats.refills - refills;
    flushes = h->stats.flushes - flushes;
    pcm_test_printf("  %s path: limit %u, %lu refills and %lu flushes in the last 100 rounds of %u\n",
                    pcm_fast_path_name(), pcm_bin_limit(&h->bins[cls]), (unsigned long)refills,
                    (unsigned long)flushes, MEDIUM_BATCH);
    PCM_CHECK(refills == 0 && flushes == 0, "%lu refills and %lu flushes in 100 rounds of %u objects of %u bytes",
              (unsigned long)refills, (unsigned long)flushes, MEDIUM_BATCH, MEDIUM_SIZE);
    sched_setaffinity(0, sizeof saved, &saved);
}

/* Objects of the big classes (one to a span, sizeclass.c), one at a time
 * in increasing size, each written whole and freed: the objects cached
 * idle never come to more than PCM_BIG_IDLE_BYTES, because a refill that
 * would pass it sends the others home, and the next spans go over their
 * pages.  So a pass over all 36 classes commits little more than that
 * budget, where a cached object in each of the 18 above 64 KiB held 2.5
 * MiB. */
#define PASS_COMMITS_MOST (PCM_BIG_IDLE_BYTES + 2u * PCM_SMALL_MAX)

static size_t big_cached_bytes(const struct pcm_heap *h)
{
    size_t bytes = 0;
    for (unsigned c = PCM_CLASS_BIG_FIRST; c < PCM_CLASS_COUNT; c++)
        bytes += pcm_cache_depth_of(pcm_load_relaxed(&h->bins[c].cache.half.ptr)) * pcm_class_size(c);
    return bytes;
}

PCM_TEST(big_class_refill_sends_the_other_big_objects_home)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    struct pcm_heap *h = pcm_heap_current();
    /* (Objects an earlier test left cached would count in full.) */
    if (!hold_cached(h, PCM_CLASS_BIG_FIRST, PCM_CLASS_COUNT))
        return;
    for (unsigned pass = 0; pass < 3; pass++) {
        struct pcm_stats_totals before, after;
        pcm_stats_totals_read(&before);
        size_t most_cached = 0;
        for (unsigned c = PCM_CLASS_BIG_FIRST; c < PCM_CLASS_COUNT; c++) {
            size_t size = pcm_class_size(c);
            unsigned char *p = pcm_malloc(size);
            PCM_REQUIRE(p, "out of memory at %zu bytes", size);
            memset(p, (int)c, size);
            PCM_REQUIRE(p[0] == c && p[size / 2] == c && p[size - 1] == c, "object of %zu bytes (%p) overwritten",
                        size, (void *)p);
            pcm_free(p);
            size_t cached = big_cached_bytes(h);
            most_cached = cached > most_cached ? cached : most_cached;
            PCM_CHECK(cached <= PCM_BIG_IDLE_BYTES, "%s path: %zu KiB of big objects cached after a free of %zu",
                      pcm_fast_path_name(), cached / 1024, size);
        }
        pcm_stats_totals_read(&after);
        size_t grew = after.committed_bytes - before.committed_bytes;
        pcm_test_printf("  %s path, pass %u over the big classes: %zu KiB committed, at most %zu KiB cached\n",
                        pcm_fast_path_name(), pass, grew / 1024, most_cached / 1024);
        PCM_CHECK(grew <= PASS_COMMITS_MOST, "pass %u over the big classes committed %zu KiB", pass, grew / 1024);
    }
    free_held();
    sched_setaffinity(0, sizeof saved, &saved);
}

/* A program that keeps objects of every big class up to 64 KiB going: a
 * refill of one of them leaves the others' cached objects where they are,
 * as one of each comes to less than PCM_BIG_IDLE_BYTES (with 256 KiB, a
 * refill sent them home and each of their next mallocs cut a span). */
#define KEPT_MOST (64u * 1024)

PCM_TEST(big_class_refill_keeps_one_object_of_each_class_up_to_64_kib)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    struct pcm_heap *h = pcm_heap_current();
    unsigned target = pcm_size_class(KEPT_MOST), end = pcm_big_stand_ins_end(target);
    size_t one_each = 0;
    for (unsigned c = PCM_CLASS_BIG_FIRST; c <= target; c++)
        one_each += pcm_class_size(c);
    PCM_REQUIRE(pcm_class_size(target) == KEPT_MOST, "no class of %u bytes", KEPT_MOST);
    /* Every cache from the first big class to the target's last stand-in
     * empty first (a malloc takes a bigger class's object as a stand-in). */
    if (!hold_cached(h, PCM_CLASS_BIG_FIRST, end))
        return;
    /* One object of each class below the target, written whole, then all
     * freed into their caches. */
    unsigned others = target - PCM_CLASS_BIG_FIRST;
    for (unsigned i = 0; i < others; i++)
        allocate_one(i, pcm_class_size(PCM_CLASS_BIG_FIRST + i));
    for (unsigned i = 0; i < others; i++)
        release_one(i, pcm_class_size(PCM_CLASS_BIG_FIRST + i));
    for (unsigned c = PCM_CLASS_BIG_FIRST; c < target; c++)
        PCM_REQUIRE(pcm_bin_listed_hint(&h->bins[c]), "%s path: the %zu-byte cache is empty before the refill",
                    pcm_fast_path_name(), pcm_class_size(c));
    pcm_word_t refills = h->stats.refills;
    allocate(1, KEPT_MOST);
    PCM_REQUIRE(h->stats.refills > refills, "%s path: the malloc of %u bytes did not refill", pcm_fast_path_name(),
                KEPT_MOST);
    unsigned kept = 0;
    for (unsigned c = PCM_CLASS_BIG_FIRST; c < target; c++)
        kept += pcm_bin_listed_hint(&h->bins[c]);
    pcm_test_printf("  %s path: %u of %u classes still cached after the refill of %u bytes (%zu KiB, one each)\n",
                    pcm_fast_path_name(), kept, others, KEPT_MOST, one_each / 1024);
    PCM_CHECK(kept == others, "%s path: %u of %u caches kept their object", pcm_fast_path_name(), kept, others);
    release(1, KEPT_MOST);
    free_held();
    sched_setaffinity(0, sizeof saved, &saved);
}

/* Whether an object of `big` bytes stands in for one of `small` (heap.h:
 * both big classes, the bigger at most twice the smaller). */
static bool stands_in(size_t small, size_t big)
{
    unsigned small_cls = pcm_size_class(small), big_cls = pcm_size_class(big);
    return small_cls >= PCM_CLASS_BIG_FIRST && big_cls > small_cls && big_cls < pcm_big_stand_ins_end(small_cls);
}

/* A malloc of a big class whose cache is empty takes a cached object of a
 * class up to twice as big (heap.h), not a new span beside it: buffers of
 * 100 and 200 KiB that take turns share one object. */
#define TURN_SMALL (100u * 1024)
#define TURN_BIG (200u * 1024)

PCM_TEST(big_class_refill_takes_a_cached_bigger_object)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    struct pcm_heap *h = pcm_heap_current();
    unsigned small_cls = pcm_size_class(TURN_SMALL);
    PCM_REQUIRE(stands_in(TURN_SMALL, TURN_BIG), "%u bytes do not stand in for %u", TURN_BIG, TURN_SMALL);
    /* The small turn's class caches nothing to begin with. */
    if (!hold_cached(h, small_cls, small_cls + 1))
        return;
    for (unsigned turn = 0; turn < 4; turn++) {
        unsigned char *big = pcm_malloc(TURN_BIG);
        PCM_REQUIRE(big, "out of memory");
        memset(big, 0xB1, TURN_BIG);
        pcm_free(big);
        unsigned char *small = pcm_malloc(TURN_SMALL);
        PCM_REQUIRE(small, "out of memory");
        PCM_CHECK(small == big, "%s path, turn %u: %u bytes at %p, where the cached %u-byte object is at %p",
                  pcm_fast_path_name(), turn, TURN_SMALL, (void *)small, TURN_BIG, (void *)big);
        PCM_CHECK(pcm_malloc_usable_size(small) >= TURN_BIG, "usable %zu", pcm_malloc_usable_size(small));
        memset(small, 0x5A, TURN_SMALL);
        PCM_REQUIRE(small[0] == 0x5A && small[TURN_SMALL - 1] == 0x5A, "object %p overwritten", (void *)small);
        pcm_free(small);
    }
    free_held();
    sched_setaffinity(0, sizeof saved, &saved);
}

/* The stand-ins of each big class, counted at start-up: every class above
 * it up to twice its size, and no other. */
PCM_TEST(big_class_stand_ins_are_the_classes_up_to_twice_its_size)
{
    pcm_free(pcm_malloc(1)); /* start-up */
    for (unsigned cls = PCM_CLASS_BIG_FIRST; cls < PCM_CLASS_COUNT; cls++) {
        unsigned end = pcm_big_stand_ins_end(cls);
        size_t most = 2 * pcm_class_size(cls);
        PCM_CHECK(end > cls && end <= PCM_CLASS_COUNT, "class %u: stand-ins end at %u", cls, end);
        PCM_CHECK(end == cls + 1 || pcm_class_size(end - 1) <= most, "class %u (%zu bytes): stand-in %u is %zu bytes",
                  cls, pcm_class_size(cls), end - 1, pcm_class_size(end - 1));
        PCM_CHECK(end == PCM_CLASS_COUNT || pcm_class_size(end) > most,
                  "class %u (%zu bytes): class %u (%zu bytes) is no stand-in", cls, pcm_class_size(cls), end,
                  pcm_class_size(end));
    }
}

/* The stand-in comes off the top of the bigger class's cache, and the rest
 * of that cache stays there: the next malloc of that class takes it with
 * no refill (sent home, it had left the caches of a program of assorted
 * big buffers mostly empty). */
#define REST_SMALL (40u * 1024)
#define REST_BIG (60u * 1024)

PCM_TEST(big_class_stand_in_leaves_the_rest_cached)
{
    cpu_set_t saved;
    if (!pin_to_first_cpu(&saved))
        return;
    struct pcm_heap *h = pcm_heap_current();
    unsigned small_cls = pcm_size_class(REST_SMALL), big_cls = pcm_size_class(REST_BIG);
    PCM_REQUIRE(stands_in(REST_SMALL, REST_BIG) && pcm_bin_shapes[big_cls].limit >= 2,
                "%u bytes do not stand in for %u, or are not cached two at a time", REST_BIG, REST_SMALL);
    /* The caches from the small class up to the big one empty to begin
     * with (a stand-in comes from the first that holds one). */
    if (!hold_cached(h, small_cls, big_cls + 1))
        return;
    void *first = pcm_malloc(REST_BIG), *second = pcm_malloc(REST_BIG);
    PCM_REQUIRE(first && second, "out of memory");
    /* (A cache starts at one object of this class, and a refill may set
     * its limit.) */
    pcm_bin_set_limit(&h->bins[big_cls], pcm_bin_shapes[big_cls].limit);
    pcm_free(first);
    pcm_free(second);
    void *small = pcm_malloc(REST_SMALL);
    PCM_CHECK(small == second, "%s path: %u bytes at %p, where the cached %u-byte objects are at %p (top) and %p",
              pcm_fast_path_name(), REST_SMALL, small, REST_BIG, second, first);
    pcm_word_t refills = h->stats.refills;
    void *again = pcm_malloc(REST_BIG);
    PCM_CHECK(again == first && h->stats.refills == refills,
              "%s path: %u bytes at %p after %lu refills, where %p stayed cached (%lu refills before)",
              pcm_fast_path_name(), REST_BIG, again, (unsigned long)h->stats.refills, first, (unsigned long)refills);
    pcm_free(again);
    pcm_free(small);
    free_held();
    sched_setaffinity(0, sizeof saved, &saved);
}
