/*
 * tests/stress/phase_trim.c - a program's phase ends: memory comes back.
 *
 * Threads allocate 1 GiB (256 MiB on 32-bit builds) of small objects of
 * mixed sizes, writing every byte, then free them all - half their own,
 * half a neighbour's (remote frees).  malloc_trim(0) must then say it
 * released memory and bring the resident set back to within 64 MiB of
 * where it was before the phase (relative, because under qemu-user the
 * emulator's own memory is part of the process), and the committed-bytes
 * statistic down with it.  Allocation works after the trim: a second,
 * smaller phase is written and checked byte by byte.  /proc/self/statm
 * gives the resident pages.
 *
 * The same phase without malloc_trim: with PCMALLOC_PURGE_DELAY at 100 ms
 * (set in pcm_opts directly), three bursts of frees a delay apart - decay
 * ticks run on the free path, there is no background thread - must bring
 * the resident set back within the same margin, plus 16 MiB for each other
 * CPU: decay does not empty the per-CPU caches, whose objects keep their
 * spans committed until malloc_trim (on 4 CPUs that is about 40 MiB).
 *
 * PCM_TEST_PHASE_MIB sets a smaller phase, down to the 256 MiB the 32-bit
 * builds always use (four times the margin, so memory that stayed would
 * still show): the whole-machine runs use it, where writing 1 GiB four
 * times took 76 of the arm64 machine's 192 s of tests (qemu/run-vm.sh), and
 * the arm64 build under qemu-user (17 s a CPU model at 1 GiB, 6 at 256 MiB;
 * qemu/run-tests.sh).  x86_64 writes the whole GiB natively.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "heap.h"
#include "init.h"
#include "stats.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define PHASE_BYTES_MOST (sizeof(void *) == 8 ? 1024 * MIB : 256 * MIB)
#define PHASE_BYTES_LEAST (256 * MIB)
#define RSS_MARGIN (64 * MIB)
#define CACHED_SPANS_PER_CPU (16 * MIB)

struct phase {
    unsigned threads;
    size_t bytes_per_thread;
    unsigned char ***objects; /* [thread] -> array of objects */
    size_t *counts;
    volatile int failed;
};

static size_t object_size(uint64_t *rng)
{
    return 16 + (size_t)(pcm_test_rand(rng) % 1009);
}

static unsigned char object_byte(size_t i)
{
    return (unsigned char)(i * 131 + 7);
}

static void allocate(void *arg, unsigned index)
{
    struct phase *ph = arg;
    uint64_t rng = pcm_test_seed() * 2 + 1 + index;
    size_t capacity = ph->bytes_per_thread / 16 + 1, count = 0, bytes = 0;
    unsigned char **objects = pcm_malloc(capacity * sizeof *objects);
    if (!objects) {
        ph->failed = 1;
        return;
    }
    while (bytes < ph->bytes_per_thread && count < capacity) {
        size_t size = object_size(&rng);
        unsigned char *p = pcm_malloc(size);
        if (!p) {
            ph->failed = 2;
            break;
        }
        memset(p, object_byte(count), size);
        objects[count++] = p;
        bytes += size;
    }
    ph->objects[index] = objects;
    ph->counts[index] = count;
}

/* Thread i frees the odd objects of its own and the even ones of thread
 * i + 1's: half the frees are remote. */
static void release(void *arg, unsigned index)
{
    struct phase *ph = arg;
    unsigned other = (index + 1) % ph->threads;
    for (size_t i = 1; i < ph->counts[index]; i += 2)
        pcm_free(ph->objects[index][i]);
    for (size_t i = 0; i < ph->counts[other]; i += 2)
        pcm_free(ph->objects[other][i]);
}

/* The phase's bytes: PHASE_BYTES_MOST, or PCM_TEST_PHASE_MIB within
 * [PHASE_BYTES_LEAST, PHASE_BYTES_MOST]; 0 outside it. */
static size_t phase_bytes(void)
{
    size_t mib = (size_t)pcm_test_env_number("PCM_TEST_PHASE_MIB", PHASE_BYTES_MOST / MIB);
    return mib >= PHASE_BYTES_LEAST / MIB && mib <= PHASE_BYTES_MOST / MIB ? mib * MIB : 0;
}
#define PHASE_BYTES_RANGE "PCM_TEST_PHASE_MIB is outside %zu..%zu", PHASE_BYTES_LEAST / MIB, PHASE_BYTES_MOST / MIB

/* Allocate the phase across threads and free it all; the resident set at
 * its peak, 0 on failure (reported). */
static size_t run_phase(struct phase *ph, size_t bytes)
{
    memset(ph, 0, sizeof *ph);
    ph->threads = pcm_test_threads();
    ph->bytes_per_thread = bytes / ph->threads;
    ph->objects = pcm_test_shared_alloc(ph->threads * sizeof *ph->objects);
    ph->counts = pcm_test_shared_alloc(ph->threads * sizeof *ph->counts);
    if (!ph->objects || !ph->counts) {
        PCM_CHECK(0, "no shared memory");
        return 0;
    }
    if (pcm_test_run_workers(ph->threads, allocate, ph) != 0 || ph->failed) {
        PCM_CHECK(0, "allocation failed (%d)", ph->failed);
        return 0;
    }
    size_t peak = pcm_test_resident_bytes();
    if (pcm_test_run_workers(ph->threads, release, ph) != 0) {
        PCM_CHECK(0, "workers did not start");
        return 0;
    }
    for (unsigned t = 0; t < ph->threads; t++)
        pcm_free(ph->objects[t]);
    pcm_test_shared_free(ph->objects, ph->threads * sizeof *ph->objects);
    pcm_test_shared_free(ph->counts, ph->threads * sizeof *ph->counts);
    return peak;
}

PCM_TEST(trim_after_phase_returns_memory)
{
    pcm_free(pcm_malloc(1));
    size_t baseline = pcm_test_resident_bytes();
    PCM_REQUIRE(baseline > 0, "cannot read /proc/self/statm");

    size_t bytes = phase_bytes();
    PCM_REQUIRE(bytes, PHASE_BYTES_RANGE);
    struct phase ph;
    size_t peak = run_phase(&ph, bytes);
    PCM_REQUIRE(peak, "the phase failed");

    struct pcm_stats_totals before, after;
    pcm_stats_totals_read(&before);
    int released = pcm_malloc_trim(0);
    size_t trimmed = pcm_test_resident_bytes();
    pcm_stats_totals_read(&after);
    pcm_test_printf("  %u threads, %zu MiB of objects: resident %zu MiB before, %zu MiB at the peak, %zu MiB "
                    "after malloc_trim; committed %zu -> %zu MiB\n",
                    ph.threads, bytes / MIB, baseline / MIB, peak / MIB, trimmed / MIB,
                    (size_t)(before.committed_bytes / MIB), (size_t)(after.committed_bytes / MIB));
    PCM_CHECK(released == 1, "malloc_trim(0) returned %d", released);
    PCM_CHECK(peak > baseline + bytes / 2, "the phase never became resident (%zu MiB)", peak / MIB);
    PCM_CHECK(trimmed < baseline + RSS_MARGIN, "resident %zu MiB after the trim, %zu MiB before the phase",
              trimmed / MIB, baseline / MIB);
    PCM_CHECK(after.committed_bytes < RSS_MARGIN, "committed %zu MiB after the trim",
              (size_t)(after.committed_bytes / MIB));

    /* Memory given back is usable again. */
    enum { AGAIN = 20000 };
    static unsigned char *again[AGAIN];
    uint64_t rng = 12345;
    for (size_t i = 0; i < AGAIN; i++) {
        size_t size = object_size(&rng);
        again[i] = pcm_malloc(size);
        PCM_REQUIRE(again[i], "malloc after the trim failed");
        memset(again[i], object_byte(i), size);
    }
    rng = 12345;
    for (size_t i = 0; i < AGAIN; i++) {
        size_t size = object_size(&rng);
        for (size_t b = 0; b < size; b++)
            if (again[i][b] != object_byte(i)) {
                PCM_CHECK(0, "object %zu changed at byte %zu after the trim", i, b);
                return;
            }
        pcm_free(again[i]);
    }
}

/* Enough frees of one class to overflow this CPU's cache: a flush, which
 * runs a decay tick when one is due. */
static void burst_of_frees(void)
{
    enum { BURST = 4096 };
    static void *objects[BURST];
    for (unsigned i = 0; i < BURST; i++)
        objects[i] = pcm_malloc(48);
    for (unsigned i = 0; i < BURST; i++)
        pcm_free(objects[i]);
}

PCM_TEST(decay_after_phase_returns_memory)
{
    size_t bytes = phase_bytes();
    PCM_REQUIRE(bytes, PHASE_BYTES_RANGE); /* (before the delay changes: it returns) */
    pcm_free(pcm_malloc(1));
    unsigned saved_delay = pcm_opts.purge_delay_ms;
    pcm_opts.purge_delay_ms = 100;
    pcm_malloc_trim(0); /* start from nothing kept */
    size_t baseline = pcm_test_resident_bytes();
    struct phase ph;
    size_t peak = run_phase(&ph, bytes);
    if (!peak)
        pcm_opts.purge_delay_ms = saved_delay; /* the next tests run with the real delay */
    PCM_REQUIRE(peak, "the phase failed");
    size_t freed = pcm_test_resident_bytes();
    for (int tick = 0; tick < 3; tick++) {
        pcm_test_sleep_ms(150);
        burst_of_frees();
    }
    size_t decayed = pcm_test_resident_bytes();
    pcm_opts.purge_delay_ms = saved_delay;
    struct pcm_stats_totals totals;
    pcm_stats_totals_read(&totals);
    pcm_test_printf("  %zu MiB of objects: resident %zu MiB before, %zu MiB at the peak, %zu MiB when all was "
                    "freed, %zu MiB three decay periods later (committed %zu MiB)\n",
                    bytes / MIB, baseline / MIB, peak / MIB, freed / MIB, decayed / MIB,
                    (size_t)(totals.committed_bytes / MIB));
    PCM_CHECK(peak > baseline + bytes / 2, "the phase never became resident (%zu MiB)", peak / MIB);
    /* Decay cannot reach the caches of CPUs no thread runs on any more
     * (only malloc_trim visits them): their objects keep whole spans
     * committed.  Measured: about 10 MiB per such CPU after this phase. */
    size_t margin = RSS_MARGIN + (pcm_heap_count - 1) * CACHED_SPANS_PER_CPU;
    PCM_CHECK(decayed < baseline + margin, "resident %zu MiB after decay, %zu MiB before the phase (margin %zu MiB)",
              decayed / MIB, baseline / MIB, margin / MIB);
}

/* A program that goes quiet after a phase gets its pages back at its
 * first refill after the delay, not two delays later: no slow path ran
 * for a whole delay, so all that is free has been free that long (decay.h).
 * One thread, QUIET_BYTES of small objects written and freed, a pause of
 * 1.5 delays, then one malloc of a class the phase never used (its cache
 * is empty: a refill, whose tick runs first).  What stays is what the
 * caches of this CPU hold (at most 64 KiB a class). */
#define QUIET_BYTES (sizeof(void *) == 8 ? 128 * MIB : 64 * MIB)
#define QUIET_MARGIN (16 * MIB)

PCM_TEST(a_quiet_period_returns_memory_at_the_next_refill)
{
    pcm_free(pcm_malloc(1));
    unsigned saved_delay = pcm_opts.purge_delay_ms;
    pcm_opts.purge_delay_ms = 100;
    pcm_malloc_trim(0);
    size_t baseline = pcm_test_resident_bytes();
    uint64_t rng = pcm_test_seed() * 2 + 1;
    size_t most = QUIET_BYTES / 16, count = 0, bytes = 0;
    unsigned char **objects = pcm_test_shared_alloc(most * sizeof *objects);
    PCM_REQUIRE(objects, "cannot map the object array");
    while (bytes < QUIET_BYTES && count < most) {
        size_t size = object_size(&rng);
        unsigned char *p = pcm_malloc(size);
        PCM_REQUIRE(p, "malloc(%zu) failed after %zu bytes", size, bytes);
        memset(p, object_byte(count), size);
        objects[count++] = p;
        bytes += size;
    }
    size_t peak = pcm_test_resident_bytes();
    for (size_t i = 0; i < count; i++)
        pcm_free(objects[i]);
    pcm_test_shared_free(objects, most * sizeof *objects);
    size_t freed = pcm_test_resident_bytes();
    pcm_test_sleep_ms(150);
    void *p = pcm_malloc(3000);
    size_t after = pcm_test_resident_bytes();
    pcm_free(p);
    pcm_opts.purge_delay_ms = saved_delay;
    pcm_test_printf("  %zu MiB of objects: resident %zu MiB before, %zu MiB at the peak, %zu MiB when all was "
                    "freed, %zu MiB at the first refill 150 ms later (delay 100 ms)\n",
                    bytes / MIB, baseline / MIB, peak / MIB, freed / MIB, after / MIB);
    PCM_CHECK(peak > baseline + QUIET_BYTES / 2, "the phase never became resident (%zu MiB)", peak / MIB);
    PCM_CHECK(after < baseline + QUIET_MARGIN, "resident %zu MiB at the first refill after a quiet period, %zu MiB "
              "before the phase (margin %zu MiB)", after / MIB, baseline / MIB, QUIET_MARGIN / MIB);
}
