/*
 * tests/stress/segment_pool.c - the segment pool (src/segment_pool.c) under
 * threads: eight workers (more than the cores) each allocate phases of
 * small objects, two of them large blocks as well, while others trim, so
 * that empty segments go to the pool while heaps take segments from it and
 * large objects take runs of its chunks.  On 64-bit the process's address
 * space is limited (RLIMIT_AS, 320 MiB above what it has) so that mmap
 * fails and large objects do come from the pool: one of 128 MiB surely,
 * made before the workers start and checked after, others as the run
 * goes (counted, not required: it depends on the timing).  Every
 * object is stamped where it starts and ends (a large one at every MiB)
 * and checked before it is freed: a chunk handed to two users at once, or
 * zeroed under one, shows as a wrong stamp.  On the rseq path empty
 * segments are unmapped instead of pooled, while the other workers'
 * sections run: a read of an unmapped segment would be a crash, and the
 * 128 MiB block must then be a mapping of its own in the address space
 * they gave back.
 */
#include "harness.h"
#include "address_limit.h"

#include "pcmalloc.h"

#include "large.h"
#include "segment_map.h"
#include "segment_pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB ((size_t)1 << 20)
#define WORKERS 8u
#define ROUNDS 12u /* times PCM_TEST_SCALE */
#define PHASE_OBJECTS 160u /* mostly 150-200 KiB: about 24 MiB a phase */
#define LARGE_LIVE 2u

struct shared {
    volatile pcm_word_t errors, nulls, pooled_large, large_made;
};

static struct shared *shared;

static void count(volatile pcm_word_t *counter)
{
    __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static uint32_t stamp_of(unsigned worker, unsigned round, unsigned i)
{
    return (worker << 24) ^ (round << 16) ^ i ^ 0x5a5a0000u;
}

static size_t small_size(uint64_t *rng)
{
    uint64_t r = pcm_test_rand(rng);
    return r % 4 ? 150 * 1024 + (size_t)(r >> 8) % (50 * 1024) : 16 + (size_t)(r >> 8) % 4000;
}

/* The stamps at every MiB and in the last 4 bytes (not aligned: memcpy). */
static void stamp_large(unsigned char *p, size_t size, uint32_t stamp)
{
    for (size_t at = 0; at + 4 <= size; at += MIB)
        *(uint32_t *)(p + at) = stamp ^ (uint32_t)(at / MIB);
    uint32_t end = ~stamp;
    memcpy(p + size - 4, &end, 4);
}

static bool large_intact(const unsigned char *p, size_t size, uint32_t stamp)
{
    for (size_t at = 0; at + 4 <= size; at += MIB)
        if (*(const uint32_t *)(p + at) != (stamp ^ (uint32_t)(at / MIB)))
            return false;
    uint32_t end;
    memcpy(&end, p + size - 4, 4);
    return end == ~stamp;
}

static void work(void *arg, unsigned worker)
{
    (void)arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (worker + 1);
    uint32_t *objects[PHASE_OBJECTS];
    size_t sizes[PHASE_OBJECTS];
    unsigned char *large[LARGE_LIVE] = {NULL};
    size_t large_size[LARGE_LIVE];
    uint32_t large_stamp[LARGE_LIVE];
    unsigned rounds = (unsigned)pcm_test_scale(ROUNDS);
    for (unsigned round = 0; round < rounds; round++) {
        for (unsigned i = 0; i < PHASE_OBJECTS; i++) {
            sizes[i] = small_size(&rng);
            objects[i] = pcm_malloc(sizes[i]);
            if (!objects[i]) {
                count(&shared->nulls);
                continue;
            }
            objects[i][0] = stamp_of(worker, round, i);
            objects[i][sizes[i] / 4 - 1] = ~stamp_of(worker, round, i);
        }
        for (unsigned i = 0; i < PHASE_OBJECTS; i++) {
            if (!objects[i])
                continue;
            if (objects[i][0] != stamp_of(worker, round, i) ||
                objects[i][sizes[i] / 4 - 1] != ~stamp_of(worker, round, i))
                count(&shared->errors);
            pcm_free(objects[i]);
        }
        pcm_malloc_trim(0); /* empty segments to the pool, while others allocate */
        if (worker < 2) { /* a large block replaced, of 48 to 96 MiB: more than the limit leaves */
            unsigned k = round % LARGE_LIVE;
            if (large[k] && !large_intact(large[k], large_size[k], large_stamp[k]))
                count(&shared->errors);
            pcm_free(large[k]);
            large_size[k] = (48 + (size_t)(pcm_test_rand(&rng) % 48)) * MIB + 12345;
            large[k] = pcm_malloc(large_size[k]);
            if (large[k]) {
                count(&shared->large_made);
                const struct pcm_large *header = pcm_segment_map_find(large[k]);
                if (header && header->pooled)
                    count(&shared->pooled_large);
                large_stamp[k] = stamp_of(worker, round, 0xffff);
                stamp_large(large[k], large_size[k], large_stamp[k]);
            } else {
                count(&shared->nulls);
            }
        }
    }
    for (unsigned k = 0; k < LARGE_LIVE; k++) {
        if (large[k] && !large_intact(large[k], large_size[k], large_stamp[k]))
            count(&shared->errors);
        pcm_free(large[k]);
    }
}

/* Before the workers: 200 MiB of small objects, freed and trimmed, then a
 * block of 128 MiB, which under the limit (320 MiB, 200 of them the
 * pool's now) only the pool can give: one large object surely on pooled
 * chunks, kept live (and checked) while the workers churn around it. */
static unsigned char *block_from_the_pool(size_t size)
{
    enum { N = 1000 };
    static void *objects[N];
    for (unsigned i = 0; i < N; i++)
        objects[i] = pcm_malloc(200 * 1024);
    for (unsigned i = 0; i < N; i++)
        pcm_free(objects[i]);
    pcm_malloc_trim(0);
    unsigned char *block = pcm_malloc(size);
    if (block)
        stamp_large(block, size, 0xb10cu);
    return block;
}

static int child(void *arg)
{
    (void)arg;
    pcm_free(pcm_malloc(1)); /* set up: the pool needs the index */
    bool limited = sizeof(void *) == 8 && pcm_test_limit_address_space((size_t)320 << 20);
    /* The rseq path unmaps empty segments (segment_pool.h): there the
     * block is a plain mapping in the address space they gave back. */
    bool unmapping = limited && pcm_segment_pool_unmaps();
    bool pooling = limited && pcm_segment_pool_enabled() && !unmapping;
    size_t size = 128 * MIB + 4321;
    unsigned char *block = block_from_the_pool(size);
    const struct pcm_large *header = block ? pcm_segment_map_find(block) : NULL;
    if (pooling && !(header && header->pooled))
        return 3;
    if (unmapping && !(header && !header->pooled))
        return 4;
    if (pcm_test_run_workers(WORKERS, work, NULL) != 0)
        return 1;
    if (block && !large_intact(block, size, 0xb10cu))
        count(&shared->errors);
    pcm_free(block);
    return shared->errors ? 2 : 0;
}

PCM_TEST(pool_under_threads_trims_and_large_blocks)
{
    /* Shared with the child (the harness's shared memory is only the
     * threads'). */
    void *page = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    PCM_REQUIRE(page != MAP_FAILED, "no shared page");
    shared = page;
    struct pcm_test_child out = pcm_test_run_child(child, NULL, 300);
    pcm_test_printf("    %lu large blocks, %lu of them on pooled chunks; %lu allocations said ENOMEM\n",
                    (unsigned long)shared->large_made, (unsigned long)shared->pooled_large,
                    (unsigned long)shared->nulls);
    PCM_CHECK(out.ran && !out.signaled && out.exit_status == 0,
              "child: status %d, signal %d (1: workers, 2: %lu wrong stamps, 3: the 128 MiB block not from the pool, "
              "4: no 128 MiB block after the segments were unmapped) %s",
              out.exit_status, out.signaled ? out.signal : 0, (unsigned long)shared->errors, out.text);
    munmap(page, sizeof *shared);
}
