/*
 * tests/stress/large_cache_churn.c - the cache of freed large mappings
 * under contention: threads allocate, grow by realloc, hand over (through
 * shared slots) and free large objects of 256 KiB .. 3 MiB, while decay
 * runs on every call (PCMALLOC_PURGE_DELAY=0) and one thread calls
 * malloc_trim(0) now and then - so takes, puts, decay and trim race for
 * the same slots.  A taker that read the header of a mapping another
 * thread was unmapping would fault; one that got a mapping twice would
 * see another thread's stamp in it.  Every object carries its size and a
 * tag at both ends, checked at each hand-over and free; the cache never
 * holds more mappings than it has slots, nor (when quiet) more bytes than
 * its bound.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "init.h"
#include "large_cache.h"
#include "sizeclass.h"

#include <stdint.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define SLOTS 64u
/* Large calls are costly in a TCG virtual machine (every munmap is a TLB
 * shootdown across its CPUs): 24000 took 145 s there at half scale. */
#define OPS_TOTAL 4000ul
#define BOUND_MIB 16u

struct churn {
    void *volatile *slots;
    unsigned long ops_per_thread;
    uint64_t seed;
    volatile int failed;
};

struct stamp {
    size_t size;
    uint64_t tag;
};

static uint64_t tag_of(const void *p, size_t size)
{
    return ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) ^ size;
}

/* Size and tag at the start, the tag's low byte at the end. */
static void stamp(unsigned char *p, size_t size)
{
    struct stamp s = {size, tag_of(p, size)};
    memcpy(p, &s, sizeof s);
    p[size - 1] = (unsigned char)s.tag;
}

static bool stamp_ok(struct churn *c, const unsigned char *p, const char *when)
{
    struct stamp s;
    memcpy(&s, p, sizeof s);
    if (s.tag == tag_of(p, s.size) && s.size > PCM_SMALL_MAX && p[s.size - 1] == (unsigned char)s.tag)
        return true;
    if (!c->failed) {
        c->failed = 1;
        PCM_CHECK(0, "object %p %s: size %zu, tag %llx (run seed %llu)", (const void *)p, when, s.size,
                  (unsigned long long)s.tag, (unsigned long long)c->seed);
    }
    return false;
}

static void worker(void *arg, unsigned index)
{
    struct churn *c = arg;
    uint64_t rng = c->seed + index * 2 + 1;
    for (unsigned long op = 0; op < c->ops_per_thread && !c->failed; op++) {
        uint64_t r = pcm_test_rand(&rng);
        size_t size = PCM_SMALL_MAX + 1 + (size_t)(r % (3 * MIB - PCM_SMALL_MAX));
        unsigned char *p = pcm_malloc(size);
        if (!p) {
            c->failed = 1;
            PCM_CHECK(0, "malloc(%zu) returned NULL", size);
            return;
        }
        stamp(p, size);
        if (r >> 60 == 0) { /* one in 16 grows, as a buffer does */
            size_t grown = size + size / 2;
            unsigned char *q = pcm_realloc(p, grown);
            if (!q) {
                c->failed = 1;
                PCM_CHECK(0, "realloc(%zu) returned NULL", grown);
                return;
            }
            struct stamp s;
            memcpy(&s, q, sizeof s);
            if (s.size != size || s.tag != tag_of(p, size) || q[size - 1] != (unsigned char)s.tag) {
                c->failed = 1;
                PCM_CHECK(0, "realloc from %zu to %zu lost the contents", size, grown);
                return;
            }
            p = q;
            size = grown;
            stamp(p, size);
        }
        unsigned slot = (unsigned)(r >> 32) % SLOTS;
        unsigned char *old = __atomic_exchange_n(&c->slots[slot], p, __ATOMIC_ACQ_REL);
        if (old) {
            if (!stamp_ok(c, old, "handed over"))
                return;
            pcm_free(old);
        }
        if (index == 0 && op % 64 == 63)
            pcm_malloc_trim(0);
        unsigned count = pcm_large_cache_count();
        if (count > PCM_LARGE_CACHE_SLOTS) {
            c->failed = 1;
            PCM_CHECK(0, "%u mappings cached, %u slots", count, PCM_LARGE_CACHE_SLOTS);
        }
    }
}

PCM_TEST(large_cache_churn_with_decay_and_trim)
{
    pcm_free(pcm_malloc(1));
    struct pcm_options saved = pcm_opts;
    pcm_opts.purge_delay_ms = 0; /* a decay tick on every large call */
    pcm_opts.large_cache_mib = BOUND_MIB;
    pcm_malloc_trim(0);

    struct churn c;
    memset(&c, 0, sizeof c);
    unsigned threads = pcm_test_threads();
    c.seed = pcm_test_seed();
    c.ops_per_thread = pcm_test_scale(OPS_TOTAL) / threads + 1;
    c.slots = pcm_test_shared_alloc(SLOTS * sizeof *c.slots);
    PCM_REQUIRE(c.slots, "no shared memory");
    uint64_t start = pcm_test_clock_ns();
    PCM_CHECK(pcm_test_run_workers(threads, worker, &c) == 0, "workers did not start");
    for (unsigned s = 0; s < SLOTS; s++) {
        unsigned char *p = c.slots[s];
        if (p && stamp_ok(&c, p, "left in a slot"))
            pcm_free(p);
    }
    uint64_t ms = (pcm_test_clock_ns() - start) / 1000000u;
    size_t cached = pcm_large_cache_bytes();
    PCM_CHECK(cached <= (size_t)BOUND_MIB * MIB, "%zu bytes cached when quiet, bound %u MiB", cached, BOUND_MIB);
    pcm_test_printf("  %u threads, %lu large objects each: %llu ms, %zu KiB cached at the end\n", threads,
                    c.ops_per_thread, (unsigned long long)ms, cached >> 10);
    pcm_test_shared_free((void *)c.slots, SLOTS * sizeof *c.slots);
    pcm_malloc_trim(0);
    pcm_opts = saved;
}
