/*
 * tests/stress/footprint.c - the per-CPU heaps' committed memory when the
 * heaps far outnumber the CPUs that allocate: PCMALLOC_CPUS=256 (set
 * before the allocator starts), 8 threads allocating and freeing objects
 * of every size class, some freed by another thread.
 *
 * What is committed is read with mincore() over the heaps mapping (the
 * ready bitmap's page, then 256 heaps of sizeof(struct pcm_heap) bytes,
 * page-aligned).  The bound, from heap.h's layout:
 *
 *     committed <= bitmap pages + heaps used * sizeof(struct pcm_heap)
 *               =  4 KiB        + used * 8 KiB
 *     heaps used <= min(256, CPUs this machine has)
 *
 * where "used" are the heaps marked ready: a heap some thread allocated
 * through.  The 256 - used idle heaps cost one bit each, on the bitmap's
 * page.  On this test's 8 threads that is at most 4 + 8 * 8 = 68 KiB on
 * a machine whose threads stayed on 8 CPUs, 4 + 256 * 8 KiB where they
 * wandered over all; here, with fewer CPUs than 256, it is bounded by the
 * CPU count (2 CPUs: 20 KiB).  And, checked page by page: every heap not
 * ready has no page resident - after the threads, after malloc_trim,
 * after a decay tick, after the statistics and malloc_info walked the
 * heaps and after fork's lock-all (a visitor that touched an idle heap
 * would map its page and fail here).
 *
 * The mincore() figure is cross-checked with the Rss line of
 * /proc/self/smaps for the mapping that holds the heaps: equal where the
 * kernel kept the heaps a mapping of their own (their MADV_NOHUGEPAGE
 * keeps it from merging with its neighbours), at least as large where it
 * merged them with a neighbour; qemu-user writes smaps from the host's,
 * and the check is skipped where there is no smaps.
 *
 * Needs the heaps to fill whole pages of the real page size; on a kernel
 * with larger pages (arm64 with 64 KiB) it says so and skips.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "decay.h"
#include "heap.h"
#include "init.h"
#include "os.h"
#include "sizeclass.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CPUS 256u
#define THREADS 8u
#define ROUNDS 40u
#define KIB(b) ((unsigned long)((b) >> 10))

/* Before the first pcm_* call starts the allocator: this program links
 * pcmalloc without interposing malloc, so setenv's malloc is libc's. */
__attribute__((constructor)) static void footprint_cpus(void)
{
    setenv("PCMALLOC_CPUS", "256", 1);
}

struct committed {
    size_t bitmap;   /* bytes of the bitmap page(s) resident */
    size_t used;     /* bytes resident in ready heaps */
    size_t idle;     /* bytes resident in heaps not ready: must be 0 */
    unsigned ready;  /* heaps marked ready */
    unsigned first_idle_touched; /* a heap not ready with a resident page, or CPUS */
};

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* Resident bytes of [start, start + bytes), both page-aligned. */
static size_t resident(const void *start, size_t bytes)
{
    static unsigned char vec[4096];
    size_t page = page_size(), pages = bytes / page, count = 0;
    for (size_t done = 0; done < pages;) {
        size_t n = pages - done < sizeof vec ? pages - done : sizeof vec;
        if (mincore((char *)start + done * page, n * page, vec) != 0)
            return (size_t)-1;
        for (size_t i = 0; i < n; i++)
            count += vec[i] & 1;
        done += n;
    }
    return count * page;
}

static struct committed measure(void)
{
    struct committed c = {0, 0, 0, 0, CPUS};
    c.bitmap = resident((const void *)pcm_heap_ready, (size_t)((char *)pcm_heaps - (char *)pcm_heap_ready));
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        size_t bytes = resident(&pcm_heaps[i], sizeof pcm_heaps[i]);
        if (pcm_heap_is_ready(i)) {
            c.ready++;
            c.used += bytes;
        } else {
            c.idle += bytes;
            if (bytes && c.first_idle_touched == CPUS)
                c.first_idle_touched = i;
        }
    }
    return c;
}

/* smaps' Rss of the mapping holding [start, end): returns false if there
 * is no such line; *exact says whether that mapping is [start, end). */
static bool smaps_rss(uintptr_t start, uintptr_t end, size_t *rss, bool *exact)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return false;
    char line[512];
    bool inside = false, found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long low, high, kib;
        if (sscanf(line, "%lx-%lx ", &low, &high) == 2 && strchr(line, ' ') > strchr(line, '-')) {
            inside = low <= start && end <= high;
            *exact = low == start && high == end;
        } else if (inside && sscanf(line, "Rss: %lu kB", &kib) == 1) {
            *rss = (size_t)kib << 10;
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* The bound of the banner, checked; `when` names the moment. */
static void check_bound(const char *when)
{
    struct committed c = measure();
    unsigned cpus = pcm_os_cpu_count() < CPUS ? pcm_os_cpu_count() : CPUS;
    size_t bitmap_bytes = (size_t)((char *)pcm_heaps - (char *)pcm_heap_ready);
    size_t bound = bitmap_bytes + (size_t)c.ready * sizeof(struct pcm_heap);
    /* Not bounded here (they hold objects, not per-CPU state), but part of
     * what a heap that went idle keeps: its segments' resident pages. */
    size_t segment_bytes = 0;
    unsigned segments = 0;
    for (unsigned i = 0; i < pcm_heap_count; i++)
        for (struct pcm_segment *s = pcm_heap_is_ready(i) ? pcm_heaps[i].segments : NULL; s; s = s->next, segments++)
            segment_bytes += resident(s, PCM_SEGMENT_SIZE);
    pcm_test_printf("  %s: %u of %u heaps used, committed %lu KiB (bitmap %lu KiB, used heaps %lu KiB, "
                    "idle heaps %lu KiB); bound %lu KiB; their %u segments: %lu KiB resident\n",
                    when, c.ready, pcm_heap_count, KIB(c.bitmap + c.used + c.idle), KIB(c.bitmap), KIB(c.used),
                    KIB(c.idle), KIB(bound), segments, KIB(segment_bytes));
    PCM_CHECK(c.idle == 0, "%s: %lu KiB resident in heaps never used (first: heap %u)", when, KIB(c.idle),
              c.first_idle_touched);
    PCM_CHECK(c.bitmap + c.used + c.idle <= bound, "%s: %lu KiB committed, above the bound %lu KiB", when,
              KIB(c.bitmap + c.used + c.idle), KIB(bound));
    PCM_CHECK(c.ready >= 1 && c.ready <= cpus, "%s: %u heaps used on a machine of %u CPUs", when, c.ready, cpus);

    size_t rss = 0, committed = c.bitmap + c.used + c.idle;
    bool exact = false;
    uintptr_t start = (uintptr_t)pcm_heap_ready, end = (uintptr_t)(pcm_heaps + pcm_heap_count);
    if (!smaps_rss(start, end, &rss, &exact)) {
        pcm_test_printf("  (no /proc/self/smaps line for the heaps: not cross-checked)\n");
        return;
    }
    pcm_test_printf("    smaps: %lu KiB resident in %s\n", KIB(rss),
                    exact ? "the heaps' own mapping" : "a mapping the heaps share with a neighbour");
    if (exact)
        PCM_CHECK(rss == committed, "%s: smaps says %lu KiB resident in the heaps mapping, mincore %lu KiB", when,
                  KIB(rss), KIB(committed));
    else
        PCM_CHECK(rss >= committed, "%s: smaps says %lu KiB resident in the mapping around the heaps, mincore %lu "
                  "KiB in the heaps alone", when, KIB(rss), KIB(committed));
}

static bool layout_usable(void)
{
    pcm_free(pcm_malloc(1)); /* starts the allocator */
    if (pcm_heap_count != CPUS) {
        PCM_CHECK(0, "the allocator runs %u heaps, not PCMALLOC_CPUS=%u: was it started before main?",
                  pcm_heap_count, CPUS);
        return false;
    }
    if (sizeof(struct pcm_heap) % page_size() || (uintptr_t)pcm_heaps % page_size()) {
        pcm_test_printf("  heaps of %lu bytes do not fill pages of %lu: skipped\n",
                        (unsigned long)sizeof(struct pcm_heap), (unsigned long)page_size());
        return false;
    }
    return true;
}

/* Slots where threads leave objects for others to free (remote frees). */
#define SLOTS 64u
struct work {
    void *volatile slots[SLOTS];
};

static void worker(void *arg, unsigned index)
{
    struct work *work = arg;
    static __thread void *held[PCM_CLASS_COUNT];
    for (unsigned round = 0; round < ROUNDS; round++) {
        /* Every class, so every bin of the heap is written. */
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
            size_t size = pcm_class_size(c);
            unsigned char *p = pcm_malloc(size);
            PCM_REQUIRE(p, "thread %u: malloc(%lu) failed", index, (unsigned long)size);
            memset(p, (int)index, size);
            held[c] = p;
        }
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
            unsigned slot = (index * 7 + round * 13 + c) % SLOTS;
            if (c % 4 == 0)
                held[c] = __atomic_exchange_n(&work->slots[slot], held[c], __ATOMIC_ACQ_REL);
            pcm_free(held[c]); /* NULL, or another thread's object */
        }
    }
}

PCM_TEST(footprint_8_threads_at_256_cpus)
{
    if (!layout_usable())
        return;
    check_bound("after one malloc");
    struct work *work = pcm_test_shared_alloc(sizeof *work);
    PCM_REQUIRE(work, "cannot map the slots");
    PCM_REQUIRE(pcm_test_run_workers(THREADS, worker, work) == 0, "cannot start %u threads", THREADS);
    for (unsigned s = 0; s < SLOTS; s++)
        pcm_free(work->slots[s]);
    pcm_test_shared_free(work, sizeof *work);
    check_bound("after 8 threads");

    pcm_malloc_trim(0);
    check_bound("after malloc_trim");

    unsigned delay = pcm_opts.purge_delay_ms;
    pcm_opts.purge_delay_ms = 0;
    pcm_decay_maybe();
    pcm_opts.purge_delay_ms = delay;
    check_bound("after a decay tick");

    FILE *null = fopen("/dev/null", "w");
    if (null) {
        pcm_malloc_info(0, null);
        fclose(null);
    }
    struct mallinfo2 info = pcm_mallinfo2();
    (void)info;
    int saved = dup(2), quiet = open("/dev/null", O_WRONLY);
    if (saved >= 0 && quiet >= 0) {
        dup2(quiet, 2); /* the table is not what is tested */
        pcm_malloc_stats();
        dup2(saved, 2);
    }
    if (quiet >= 0)
        close(quiet);
    if (saved >= 0)
        close(saved);
    pcm_heaps_lock_all(); /* what fork does around itself */
    pcm_heaps_unlock_all();
    check_bound("after malloc_info, mallinfo2, malloc_stats and fork's lock-all");
}
