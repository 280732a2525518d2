/*
 * tests/stress/random_sizes.c - many threads allocating objects of random
 * sizes (1 byte to 4 MiB, mostly small) and freeing each other's.
 *
 * Every object is filled with its pattern (pattern.h) when allocated and
 * checked completely before it is freed; a thread's own live objects are
 * also checked every CHECK_EVERY operations.  Threads trade objects
 * through a shared array of slots: a thread swaps a new object into a
 * random slot (atomic exchange) and checks and frees what was there -
 * usually another thread's object, allocated on another CPU's heap, so
 * most of those frees are remote.  Run at 1, 2, 4, 8, 16 and 32 threads:
 * on the 2-core machines the tests run on, that is up to 16 threads per
 * core, preempted and migrated anywhere in malloc and free.
 *
 * An object that crosses the slots carries its own description, so the
 * thread that takes it can check it: objects of 16 bytes or more start
 * with a label (size and tag, each xor'd with a key from the address) and
 * the pattern covers the rest; smaller ones have tag 0 and their size in
 * the low 4 bits of the slot (every object is 16-byte aligned).
 *
 * The big-classes runs draw most sizes from 16-64 KiB, the classes of one
 * object to a span whose caches hold up to 256 KiB (sizeclass.c, heap.c),
 * and from 64-256 KiB: nearly every malloc and free there cuts or
 * releases a span, or takes a bigger class's cached object in its place,
 * on heaps that other threads free into at the same time.
 *
 * A failed check names the object, the offset, the thread count and (the
 * harness adds it) the seed; the run then stops, leaving the suspect
 * object unfreed.  PCM_TEST_SCALE scales the operation count.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "pattern.h"

#define SMALL_MAX ((size_t)1024)
#define MEDIUM_MAX ((size_t)256 * 1024)
#define BIG_MAX ((size_t)4 * 1024 * 1024)

#define LABEL_BYTES 16u
#define LIVE_PER_THREAD 32u
#define SLOT_COUNT 1024u
#define CHECK_EVERY 256u
/* Operations of one run, all threads together (PCM_TEST_SCALE applies). */
#define OPS_TOTAL 160000ul
#define OPS_PER_THREAD_MIN 2000ul

struct object {
    void *p;
    size_t size;
    uint64_t tag; /* (thread index + 1) << 40 | serial; 0 below LABEL_BYTES */
};

struct run {
    unsigned threads;
    bool big_classes; /* sizes mostly of 16 KiB - 256 KiB */
    unsigned long ops_per_thread;
    uint64_t seed;
    uintptr_t *slots; /* 0, or an object packed by slot_pack */
    /* counted with __atomic adds */
    unsigned long allocated;
    unsigned long freed_by_other_thread; /* labelled objects only: a lower bound */
    unsigned long big;                   /* objects above MEDIUM_MAX */
    unsigned long checks;
    int stop; /* set at the first failed check */
};

/* ---- objects ---- */

static uint64_t label_key(const void *p, unsigned which)
{
    return pcm_pattern_mix((uint64_t)(uintptr_t)p * 2 + which);
}

static size_t random_size(const struct run *run, uint64_t *rng)
{
    if (run->big_classes) {
        unsigned pick = (unsigned)(pcm_test_rand(rng) % 100);
        size_t low = pick < 70 ? 16 * 1024 : pick < 90 ? 64 * 1024 : 0;
        size_t high = pick < 70 ? 64 * 1024 : pick < 90 ? MEDIUM_MAX : SMALL_MAX;
        return low + 1 + (size_t)(pcm_test_rand(rng) % (high - low));
    }
    unsigned pick = (unsigned)(pcm_test_rand(rng) % 100);
    size_t max = pick < 90 ? SMALL_MAX : pick < 99 ? MEDIUM_MAX : BIG_MAX;
    return 1 + (size_t)(pcm_test_rand(rng) % max);
}

static void object_fill(struct object o)
{
    if (o.size < LABEL_BYTES) {
        pcm_pattern_fill(o.p, o.size, 0);
        return;
    }
    uint64_t label[2] = {(uint64_t)o.size ^ label_key(o.p, 0), o.tag ^ label_key(o.p, 1)};
    memcpy(o.p, label, sizeof label);
    pcm_pattern_fill((char *)o.p + LABEL_BYTES, o.size - LABEL_BYTES, o.tag);
}

static void failed(struct run *run)
{
    __atomic_store_n(&run->stop, 1, __ATOMIC_RELAXED);
}

/* Check o completely; false (reported) if anything changed. */
static bool object_check(struct run *run, struct object o, const char *when)
{
    __atomic_fetch_add(&run->checks, 1, __ATOMIC_RELAXED);
    if (o.size >= LABEL_BYTES) {
        uint64_t label[2];
        memcpy(label, o.p, sizeof label);
        uint64_t size = label[0] ^ label_key(o.p, 0), tag = label[1] ^ label_key(o.p, 1);
        if (size != o.size || tag != o.tag) {
            PCM_CHECK(size == o.size && tag == o.tag,
                      "%s: object %p of %zu bytes, tag %llx: its label now says %llu bytes, tag %llx "
                      "(%u threads)",
                      when, o.p, o.size, (unsigned long long)o.tag, (unsigned long long)size,
                      (unsigned long long)tag, run->threads);
            failed(run);
            return false;
        }
    }
    const unsigned char *body = (const unsigned char *)o.p + (o.size >= LABEL_BYTES ? LABEL_BYTES : 0);
    size_t body_size = o.size >= LABEL_BYTES ? o.size - LABEL_BYTES : o.size;
    size_t bad = pcm_pattern_check(body, body_size, o.tag);
    if (bad != PCM_PATTERN_OK) {
        size_t offset = bad + (size_t)(body - (const unsigned char *)o.p);
        PCM_CHECK(bad == PCM_PATTERN_OK,
                  "%s: object %p of %zu bytes, tag %llx: byte %zu is 0x%x, expected 0x%x (%u threads)",
                  when, o.p, o.size, (unsigned long long)o.tag, offset, (unsigned)body[bad],
                  pcm_pattern_expected(body, body_size, o.tag, bad), run->threads);
        failed(run);
        return false;
    }
    return true;
}

static bool object_new(struct run *run, unsigned index, uint64_t *rng, uint64_t *serial, struct object *o)
{
    o->size = random_size(run, rng);
    o->p = pcm_malloc(o->size);
    o->tag = o->size < LABEL_BYTES ? 0 : ((uint64_t)(index + 1) << 40) | ++*serial;
    if (!o->p || (uintptr_t)o->p % 16) {
        PCM_CHECK(o->p && (uintptr_t)o->p % 16 == 0, "malloc(%zu) returned %p (%u threads)", o->size,
                  o->p, run->threads);
        failed(run);
        return false;
    }
    __atomic_fetch_add(&run->allocated, 1, __ATOMIC_RELAXED);
    if (o->size > MEDIUM_MAX)
        __atomic_fetch_add(&run->big, 1, __ATOMIC_RELAXED);
    object_fill(*o);
    return true;
}

/* Check o and free it; a corrupt object is left alone (it may be handed
 * out twice: freeing it could hide or confuse the report). */
static void object_release(struct run *run, unsigned index, struct object o, const char *when)
{
    if (!object_check(run, o, when))
        return;
    if (o.tag && o.tag >> 40 != index + 1u)
        __atomic_fetch_add(&run->freed_by_other_thread, 1, __ATOMIC_RELAXED);
    pcm_free(o.p);
}

/* ---- the shared slots ---- */

static uintptr_t slot_pack(struct object o)
{
    return (uintptr_t)o.p | (o.size < LABEL_BYTES ? o.size : 0);
}

/* Rebuild the object a slot held; false (reported) if its label is
 * nonsense. */
static bool slot_unpack(struct run *run, uintptr_t packed, struct object *o)
{
    o->p = (void *)(packed & ~(uintptr_t)15);
    if (packed & 15) {
        o->size = packed & 15;
        o->tag = 0;
        return true;
    }
    uint64_t label[2];
    memcpy(label, o->p, sizeof label);
    uint64_t size = label[0] ^ label_key(o->p, 0);
    o->tag = label[1] ^ label_key(o->p, 1);
    if (size < LABEL_BYTES || size > BIG_MAX || (o->tag >> 40) == 0 || (o->tag >> 40) > run->threads) {
        PCM_CHECK(0, "object %p taken from a slot has a corrupt label: %llu bytes, tag %llx (%u threads)",
                  o->p, (unsigned long long)size, (unsigned long long)o->tag, run->threads);
        failed(run);
        return false;
    }
    o->size = (size_t)size;
    return true;
}

static void slot_exchange(struct run *run, unsigned index, unsigned slot, uintptr_t value)
{
    uintptr_t old = __atomic_exchange_n(&run->slots[slot], value, __ATOMIC_ACQ_REL);
    struct object o;
    if (old && slot_unpack(run, old, &o))
        object_release(run, index, o, "taken from a slot");
}

/* ---- the workers ---- */

static void worker(void *arg, unsigned index)
{
    struct run *run = arg;
    uint64_t rng = pcm_pattern_mix(run->seed + index) | 1, serial = 0;
    struct object live[LIVE_PER_THREAD];
    memset(live, 0, sizeof live);

    for (unsigned long op = 0; op < run->ops_per_thread; op++) {
        if (__atomic_load_n(&run->stop, __ATOMIC_RELAXED))
            return; /* leave everything: memory may be corrupt */
        unsigned pick = (unsigned)(pcm_test_rand(&rng) % 100);
        unsigned i = (unsigned)(pcm_test_rand(&rng) % LIVE_PER_THREAD);
        unsigned slot = (unsigned)(pcm_test_rand(&rng) % SLOT_COUNT);
        struct object o;
        if (pick < 40) { /* replace one of ours */
            if (live[i].p)
                object_release(run, index, live[i], "replaced");
            live[i].p = NULL;
            if (object_new(run, index, &rng, &serial, &o))
                live[i] = o;
        } else if (pick < 80) { /* trade through a slot */
            if (object_new(run, index, &rng, &serial, &o))
                slot_exchange(run, index, slot, slot_pack(o));
        } else if (pick < 90) { /* empty a slot */
            slot_exchange(run, index, slot, 0);
        } else { /* drop one of ours */
            if (live[i].p)
                object_release(run, index, live[i], "dropped");
            live[i].p = NULL;
        }
        if (op % CHECK_EVERY == CHECK_EVERY - 1)
            for (unsigned k = 0; k < LIVE_PER_THREAD; k++)
                if (live[k].p && !object_check(run, live[k], "while live"))
                    return;
    }
    for (unsigned k = 0; k < LIVE_PER_THREAD; k++)
        if (live[k].p)
            object_release(run, index, live[k], "at the end");
}

static void random_sizes(unsigned threads, bool big_classes)
{
    struct run run;
    memset(&run, 0, sizeof run);
    run.threads = threads;
    run.big_classes = big_classes;
    run.seed = pcm_test_seed() * 0x9E3779B97F4A7C15ull + threads;
    /* (an eighth as many of the big ones: each writes a page or more, and
     * the suite runs them under emulators and VMs too) */
    unsigned long total = pcm_test_scale(big_classes ? OPS_TOTAL / 8 : OPS_TOTAL);
    run.ops_per_thread = total / threads > OPS_PER_THREAD_MIN ? total / threads : OPS_PER_THREAD_MIN;
    run.slots = pcm_test_shared_alloc(SLOT_COUNT * sizeof *run.slots);
    PCM_REQUIRE(run.slots, "cannot map %u slots", SLOT_COUNT);

    uint64_t start = pcm_test_clock_ns();
    pcm_test_run_workers(threads, worker, &run);
    if (!run.stop) {
        for (unsigned s = 0; s < SLOT_COUNT; s++) {
            struct object o;
            if (run.slots[s] && slot_unpack(&run, run.slots[s], &o) && object_check(&run, o, "left in a slot"))
                pcm_free(o.p);
            run.slots[s] = 0;
        }
    }
    uint64_t ns = pcm_test_clock_ns() - start;
    pcm_test_shared_free(run.slots, SLOT_COUNT * sizeof *run.slots);
    if (!run.stop)
        pcm_test_printf("  %u thread%s: %lu objects (%lu above 256 KiB), %lu freed by another thread, "
                        "%lu checks, %lu.%02lu s\n",
                        threads, threads == 1 ? "" : "s", run.allocated, run.big, run.freed_by_other_thread, run.checks,
                        (unsigned long)(ns / 1000000000u), (unsigned long)(ns / 10000000u % 100));
}

PCM_TEST(random_sizes_1_thread)
{
    random_sizes(1, false);
}

PCM_TEST(random_sizes_2_threads)
{
    random_sizes(2, false);
}

PCM_TEST(random_sizes_4_threads)
{
    random_sizes(4, false);
}

PCM_TEST(random_sizes_8_threads)
{
    random_sizes(8, false);
}

PCM_TEST(random_sizes_16_threads)
{
    random_sizes(16, false);
}

PCM_TEST(random_sizes_32_threads)
{
    random_sizes(32, false);
}

PCM_TEST(random_sizes_big_classes_4_threads)
{
    random_sizes(4, true);
}

PCM_TEST(random_sizes_big_classes_16_threads)
{
    random_sizes(16, true);
}
