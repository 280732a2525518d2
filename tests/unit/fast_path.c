/*
 * tests/unit/fast_path.c - which fast path runs, and what the rseq path
 * does with an object, seen from inside:
 *   - the path is the one the runner expects (PCM_TEST_EXPECT_FAST_PATH:
 *     rseq natively, cas with PCMALLOC_RSEQ=0, under qemu-user and on
 *     the generic build), with a reason to show for it;
 *   - rseq: a free on the owner's CPU lands on top of that CPU's cache
 *     slot of its class (the assembly, and the span's slot0, found the
 *     right slot: every class) and the next malloc there takes it back;
 *     a free on another CPU lands on that CPU's outgoing list of its
 *     class (no atomic, and no malloc takes it there) for objects below
 *     1 KiB, in that CPU's cache for larger ones; a full list goes home
 *     in one push, and a flush of that CPU sends the rest to the owner's
 *     remote stack of the class; a list holds at most
 *     PCM_OUTGOING_LIMIT objects and PCM_OUTGOING_BYTES, and its limit
 *     grows when it fills fast and shrinks when it fills slowly; the
 *     outgoing classes are exactly those below PCM_FOREIGN_CACHED_MIN;
 *   - rseq: every object on a remote stack carries its depth there, the
 *     owner's next refill takes the stack into its cache (whole, where it
 *     fits) with the depths a cache's objects carry, and a stack whose
 *     depths went wrong still hands out each of its objects once;
 *   - rseq: a thread whose rseq area the kernel no longer fills (we
 *     unregister it) still allocates and frees correctly, without caching;
 *   - every segment's byte in the segment index names the path, which
 *     free reads there (segment_map.h);
 *   - every request up to 1 KiB gets an object of its own class, whose
 *     slot malloc looks up by the request's 16-byte step (rseq) or whose
 *     class it looks up so (CAS).
 * Threads are pinned with sched_setaffinity; with one allowed CPU the
 * cross-CPU check is skipped (said so in the output).
 */
#include "harness.h"

#include "pcmalloc.h"

#include "fast_path.h"
#include "heap.h"
#include "init.h"
#include "percpu_rseq.h"
#include "remote.h"
#include "segment_map.h"
#include "sizeclass.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern const unsigned int __rseq_size __attribute__((weak));

/* Start-up chooses the path: make sure it ran (tests run in any order). */
static void started(void)
{
    pcm_free(pcm_malloc(1));
}

#ifdef PCM_ARCH_RSEQ
/* The first two CPUs this process may run on (-1 where there are none). */
static void allowed_cpus(int out[2])
{
    cpu_set_t set;
    out[0] = out[1] = -1;
    if (sched_getaffinity(0, sizeof set, &set))
        return;
    for (int cpu = 0, n = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
        if (CPU_ISSET(cpu, &set))
            out[n++] = cpu;
}

static void restore_affinity(const cpu_set_t *set)
{
    sched_setaffinity(0, sizeof *set, set);
}
#endif

PCM_TEST(fast_path_is_the_expected_one)
{
    started();
    const char *expect = pcm_test_getenv("PCM_TEST_EXPECT_FAST_PATH");
    pcm_test_printf("  fast path %s: %s\n", pcm_fast_path_name(), pcm_fast_path_reason());
    PCM_CHECK(pcm_fast_path_reason()[0] != '\0', "no reason given");
    if (expect)
        PCM_CHECK(strcmp(expect, pcm_fast_path_name()) == 0, "fast path %s, expected %s", pcm_fast_path_name(),
                  expect);
}

/* free's fast path reads the path from the segment index's byte
 * (segment_map.h): it must name this process's path for every segment,
 * or frees would take the other path's push. */
PCM_TEST(segment_index_names_the_fast_path)
{
    started();
    enum pcm_index_kind want = pcm_fast_path_is_rseq() ? PCM_INDEX_RSEQ : PCM_INDEX_CAS;
    void *objects[64];
    size_t size = 16;
    for (unsigned i = 0; i < 64; i++, size = size * 5 / 4 + 16)
        objects[i] = pcm_malloc(size % (256 * 1024));
    for (unsigned i = 0; i < 64; i++) {
        enum pcm_index_kind kind = pcm_segment_index_kind(objects[i]);
        /* (no index on 64-bit builds whose mapping of it failed: NONE) */
        PCM_CHECK(kind == want || kind == PCM_INDEX_NONE, "object %p: index byte %d, the %s path's is %d",
                  objects[i], (int)kind, pcm_fast_path_name(), (int)want);
        pcm_free(objects[i]);
    }
}

PCM_TEST(every_size_up_to_1_kib_gets_its_own_class)
{
    started();
    for (size_t size = 1; size <= PCM_CLASS_TABLE_MAX; size++) {
        void *p = pcm_malloc(size);
        PCM_CHECK(p != NULL, "malloc(%zu) failed", size);
        size_t usable = pcm_malloc_usable_size(p), want = pcm_class_size(pcm_size_class(size));
        PCM_CHECK(usable == want, "malloc(%zu) = %p: usable %zu, its class holds %zu", size, p, usable, want);
        PCM_CHECK((uintptr_t)p % 16 == 0, "malloc(%zu) = %p: not 16-byte aligned", size, p);
        memset(p, 0xa5, size);
        pcm_free(p);
    }
}

#ifdef PCM_ARCH_RSEQ
/* The first object of a list, 0 if empty (an empty list may hold its
 * slot's address: heap.h, pcm_chain_more). */
static pcm_word_t list_top(const void *slot)
{
    pcm_word_t top = pcm_load_relaxed((const volatile pcm_word_t *)slot);
    return pcm_chain_more((const void *)top) ? top : 0;
}

static pcm_word_t slot_top(int cpu, unsigned cls)
{
    return list_top((char *)pcm_rseq_slot0(cls) + (size_t)cpu * PCM_RSEQ_STRIDE);
}

static pcm_word_t outgoing_top(int cpu, unsigned cls)
{
    if (cls >= PCM_OUTGOING_CLASSES)
        return 0;
    return list_top((char *)pcm_rseq_outgoing_slot0(cls) + (size_t)cpu * PCM_RSEQ_STRIDE);
}
#endif

#ifdef PCM_ARCH_RSEQ
/* Start-up done and the rseq path in use (else say so: false); the
 * affinity to restore in *saved, the first two allowed CPUs in cpus. */
static bool rseq_ready(cpu_set_t *saved, int cpus[2])
{
    started();
    if (!pcm_fast_path_is_rseq()) {
        pcm_test_printf("  skipped: fast path is %s\n", pcm_fast_path_name());
        return false;
    }
    sched_getaffinity(0, sizeof *saved, saved);
    allowed_cpus(cpus);
    return true;
}

/* Free p, of class cls, on CPU cpu (pinned).  If p's span is that CPU's
 * heap's (else a preempted holder of its lock sent the refill to another),
 * p is then the top of the CPU's slot of cls, and the next malloc of
 * `size` bytes there takes it back. */
static void free_lands_on_top(int cpu, unsigned cls, size_t size, void *p)
{
    bool mine = pcm_span_of(pcm_segment_of(p), p)->owner == (unsigned)cpu;
    pcm_free(p);
    if (mine)
        PCM_CHECK(slot_top(cpu, cls) == (pcm_word_t)p, "CPU %d, class %u: freed %p, slot top is %p", cpu, cls, p,
                  (void *)slot_top(cpu, cls));
    void *q = pcm_malloc(size);
    PCM_CHECK(!mine || q == p, "CPU %d, class %u: freed %p, the next malloc of %zu bytes gave %p", cpu, cls, p, size,
              q);
    pcm_free(q);
}
#endif

PCM_TEST(rseq_free_lands_in_this_cpus_slot)
{
#ifdef PCM_ARCH_RSEQ
    cpu_set_t saved;
    int cpus[2];
    if (!rseq_ready(&saved, cpus))
        return;
    for (int i = 0; i < 2 && cpus[i] >= 0; i++) {
        PCM_REQUIRE(pcm_test_pin(cpus[i]), "cannot pin to CPU %d", cpus[i]);
        void *p = pcm_malloc(40);
        PCM_REQUIRE(p, "malloc failed");
        free_lands_on_top(cpus[i], pcm_size_class(40), 40, p);
    }
    restore_affinity(&saved);
#endif
}

/* The same for every class, on one CPU: free finds its slot through the
 * span (segment.h: slot0), so a span naming another class's slot would
 * put the object where a malloc of that class hands it out. */
PCM_TEST(rseq_free_of_every_class_lands_in_its_own_slot)
{
#ifdef PCM_ARCH_RSEQ
    cpu_set_t saved;
    int cpus[2];
    if (!rseq_ready(&saved, cpus))
        return;
    PCM_REQUIRE(pcm_test_pin(cpus[0]), "cannot pin to CPU %d", cpus[0]);
    for (unsigned cls = 0; cls < PCM_CLASS_COUNT; cls++) {
        /* Empty caches: each class starts from a refill. */
        pcm_heap_flush_caches_rseq();
        size_t size = pcm_class_size(cls);
        void *p = pcm_malloc(size);
        PCM_REQUIRE(p, "malloc(%zu) failed", size);
        struct pcm_span *span = pcm_span_of(pcm_segment_of(p), p);
        PCM_CHECK(span->slot0 == pcm_rseq_slot0(cls), "class %u: the span names the slot of class %u", cls,
                  (unsigned)(((char *)span->slot0 - (char *)pcm_rseq_slot0(0)) / sizeof(struct pcm_bin)));
        /* A refill may have filled the cache (a remote stack taken whole):
         * one more object out leaves room for p. */
        void *room = pcm_malloc(size);
        PCM_REQUIRE(room, "malloc(%zu) failed", size);
        free_lands_on_top(cpus[0], cls, size, p);
        pcm_free(room);
    }
    restore_affinity(&saved);
#endif
}

#ifdef PCM_ARCH_RSEQ
/* What an object pushed onto owner's remote list of class cls now links
 * to: the list's top, or where owner's cache of cls ends if the list is
 * a class's and empty (remote.c: it may become that cache whole). */
static pcm_word_t remote_link_below(unsigned owner, unsigned cls)
{
    pcm_word_t top = pcm_load_relaxed(pcm_remote_list(&pcm_heaps[owner], cls));
    return top || cls >= PCM_OUTGOING_CLASSES ? top : pcm_heap_list_end(&pcm_heaps[owner], cls);
}
#endif

#ifdef PCM_ARCH_RSEQ_LISTS_END_AT_SLOT
/* Whether the list at slot (quiet: no thread uses its CPU) ends at the
 * slot's own address within `most` objects: the push reads an empty
 * list's depth there (arch/x86_64/arch_rseq.h), and a 0 would fault. */
static bool ends_at_its_slot(volatile pcm_word_t *slot, unsigned most, unsigned *length)
{
    pcm_word_t at = pcm_load_relaxed(slot);
    for (*length = 0; at != (pcm_word_t)slot && at && *length <= most; ++*length)
        at = *(pcm_word_t *)at;
    return at == (pcm_word_t)slot;
}

/* Every list of every ready heap ends at its slot; false after naming the
 * first that does not. */
static bool every_list_ends_at_its_slot(const char *when)
{
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        if (!pcm_heap_is_ready(i))
            continue;
        struct pcm_heap *h = &pcm_heaps[i];
        unsigned n;
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
            if (!ends_at_its_slot(&h->bins[c].cache.half.ptr, PCM_DEPTH_MASK, &n)) {
                PCM_CHECK(false, "%s: heap %u's cache of %zu bytes does not end at its slot (%u objects followed)",
                          when, i, pcm_class_size(c), n);
                return false;
            }
        for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++)
            if (!ends_at_its_slot(&h->outgoing[c].cache.half.ptr, PCM_DEPTH_MASK, &n)) {
                PCM_CHECK(false, "%s: heap %u's outgoing list of %zu bytes does not end at its slot (%u followed)",
                          when, i, pcm_class_size(c), n);
                return false;
            }
    }
    return true;
}
#endif

/* On x86_64 and i386 an empty list holds its slot's address and a list's
 * bottom object links there (heap.h: pcm_chain_more): after refills,
 * flushes, frees on another CPU (outgoing lists, remote stacks taken whole
 * into a cache) and a trim, no list of a ready heap holds a 0 or ends in
 * one. */
PCM_TEST(rseq_lists_end_at_their_slot)
{
#ifdef PCM_ARCH_RSEQ_LISTS_END_AT_SLOT
    cpu_set_t saved;
    int cpus[2];
    if (!rseq_ready(&saved, cpus))
        return;
    PCM_REQUIRE(pcm_lists_end_at_slots, "the rseq path runs with lists that end in 0");
    enum { MADE = 600 };
    static void *p[MADE];
    unsigned where = cpus[1] >= 0 ? 2 : 1;
    for (unsigned round = 0; round < 4; round++) {
        PCM_REQUIRE(pcm_test_pin(cpus[round % where]), "cannot pin to CPU %d", cpus[round % where]);
        for (unsigned i = 0; i < MADE; i++)
            PCM_REQUIRE(p[i] = pcm_malloc(16 + (i * 40) % 2000), "malloc failed");
        if (!every_list_ends_at_its_slot("after mallocs"))
            break;
        PCM_REQUIRE(pcm_test_pin(cpus[(round + 1) % where]), "cannot pin to CPU %d", cpus[(round + 1) % where]);
        for (unsigned i = 0; i < MADE; i++)
            pcm_free(p[i]);
        if (!every_list_ends_at_its_slot("after frees on the other CPU"))
            break;
    }
    pcm_heap_flush_caches_rseq();
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        volatile pcm_word_t *slot = (volatile pcm_word_t *)((char *)pcm_rseq_slot0(c) + (size_t)cpus[0] * PCM_RSEQ_STRIDE);
        PCM_CHECK(pcm_load_relaxed(slot) == (pcm_word_t)slot, "CPU %d's flushed cache of %zu bytes holds %p, not %p",
                  cpus[0], pcm_class_size(c), (void *)pcm_load_relaxed(slot), (void *)slot);
    }
    every_list_ends_at_its_slot("after a flush");
    pcm_malloc_trim(0);
    every_list_ends_at_its_slot("after a trim");
    restore_affinity(&saved);
#endif
}

#ifdef PCM_ARCH_RSEQ
struct handoff {
    int cpu;
    void *p;
    unsigned cls;
    pcm_word_t top_after_free, top_after_flush, outgoing_after_free, outgoing_after_flush;
};

/* Free h->p on CPU h->cpu, note that CPU's cache top, then flush the
 * caches of the one CPU this thread may use. */
static void *free_on_cpu(void *arg)
{
    struct handoff *h = arg;
    if (pcm_test_pin(h->cpu)) {
        /* An allocation here first: a heap is made ready by its first
         * refill, and until then every push onto its caches goes the
         * slow way (heap.h). */
        pcm_free(pcm_malloc(56));
        pcm_free(h->p);
        h->top_after_free = slot_top(h->cpu, h->cls);
        h->outgoing_after_free = outgoing_top(h->cpu, h->cls);
        pcm_heap_flush_caches_rseq();
        h->top_after_flush = slot_top(h->cpu, h->cls);
        h->outgoing_after_flush = outgoing_top(h->cpu, h->cls);
    } else {
        h->cpu = -1;
    }
    return NULL;
}
#endif

#ifdef PCM_ARCH_RSEQ
/* Allocate `size` bytes on cpus[0], free them on cpus[1]: the object
 * must land on cpus[1]'s cache if `cached`, else on its outgoing list, and
 * reach its owner's remote stack of the class only at that CPU's flush. */
static void free_elsewhere(const int cpus[2], size_t size, bool cached)
{
    PCM_REQUIRE(pcm_test_pin(cpus[0]), "cannot pin to CPU %d", cpus[0]);
    void *p = pcm_malloc(size);
    PCM_REQUIRE(p, "malloc failed");
    unsigned owner = pcm_span_of(pcm_segment_of(p), p)->owner;
    pcm_word_t remote_before = remote_link_below(owner, pcm_size_class(size));
    struct handoff h = {cpus[1], p, pcm_size_class(size), 0, 0, 0, 0};
    pthread_t t;
    PCM_REQUIRE(pthread_create(&t, NULL, free_on_cpu, &h) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    PCM_REQUIRE(h.cpu >= 0, "cannot pin to CPU %d", cpus[1]);
    if (owner == (unsigned)cpus[1])
        return; /* (a busy heap lock sent the refill elsewhere) */
    if (cached) {
        PCM_CHECK(h.top_after_free == (pcm_word_t)p, "%zu bytes, freed %p on CPU %d: its cache top is %p", size, p,
                  cpus[1], (void *)h.top_after_free);
    } else {
        PCM_CHECK(h.top_after_free != (pcm_word_t)p, "%zu bytes: %p, heap %u's, cached on CPU %d", size, p, owner,
                  cpus[1]);
        PCM_CHECK(h.outgoing_after_free == (pcm_word_t)p, "%zu bytes, freed %p on CPU %d: its outgoing top is %p",
                  size, p, cpus[1], (void *)h.outgoing_after_free);
    }
    PCM_CHECK(h.top_after_flush != (pcm_word_t)p && h.outgoing_after_flush != (pcm_word_t)p,
              "%p still on CPU %d after its flush", p, cpus[1]);
    /* Nothing else runs: no drain can have taken it meanwhile. */
    pcm_word_t remote = pcm_load_relaxed(pcm_remote_list(&pcm_heaps[owner], pcm_size_class(size)));
    PCM_CHECK(remote == (pcm_word_t)p, "%zu bytes freed on CPU %d: %p is not on top of heap %u's remote queue (%p)",
              size, cpus[1], p, owner, (void *)remote);
    PCM_CHECK(*(pcm_word_t *)p == remote_before, "%p on heap %u's remote queue links to %p, not the old top %p", p,
              owner, (void *)*(pcm_word_t *)p, (void *)remote_before);
}
#endif

#ifdef PCM_ARCH_RSEQ
#define BATCH (2 * PCM_OUTGOING_LIMIT)

struct batch_handoff {
    int cpu;
    size_t size;
    unsigned n; /* twice the class's most outgoing limit */
    void *p[BATCH];
    pcm_word_t outgoing_after_free;
    /* With by_limit, the worker frees only twice the list's limit at the
     * time (heap.h: it follows the list's use), `limit`, of the n. */
    bool by_limit;
    unsigned limit;
};

static void *free_batch_on_cpu(void *arg)
{
    struct batch_handoff *b = arg;
    if (pcm_test_pin(b->cpu)) {
        pcm_free(pcm_malloc(56)); /* the heap made ready (free_on_cpu) */
        unsigned n = b->n;
        if (b->by_limit) {
            b->limit = pcm_bin_limit(&pcm_heaps[b->cpu].outgoing[pcm_size_class(b->size)]);
            n = 2 * b->limit < n ? 2 * b->limit : n;
        }
        for (unsigned i = 0; i < n; i++)
            pcm_free(b->p[i]);
        b->outgoing_after_free = outgoing_top(b->cpu, pcm_size_class(b->size));
    } else {
        b->cpu = -1;
    }
    return NULL;
}

/* Whether p is one of the n objects of chain, counting them in *seen. */
static bool chain_holds(pcm_word_t chain, void *const *p, unsigned n, unsigned *seen)
{
    *seen = 0;
    for (pcm_word_t obj = chain; pcm_chain_more((void *)obj) && *seen <= BATCH; obj = *(pcm_word_t *)obj, ++*seen) {
        bool found = false;
        for (unsigned i = 0; i < n && !found; i++)
            found = (pcm_word_t)p[i] == obj;
        if (!found)
            return false;
    }
    return true;
}

/* Whether each object of chain carries its depth, the number of objects
 * from it to the end, as a cache's do (percpu_cache.h); *at: the first
 * that does not. */
static bool depths_count_down(pcm_word_t chain, unsigned *at)
{
    unsigned n = 0;
    for (pcm_word_t obj = chain; pcm_chain_more((void *)obj); obj = *(pcm_word_t *)obj)
        n++;
    *at = 0;
    for (pcm_word_t obj = chain; pcm_chain_more((void *)obj); obj = *(pcm_word_t *)obj, n--, (*at)++)
        if ((((pcm_word_t *)obj)[1] & PCM_DEPTH_MASK) != n)
            return false;
    return true;
}

/* Twice the outgoing limit of `size` bytes' class, objects of one heap,
 * freed on another CPU: the first `limit` fill its outgoing list, the
 * next free sends them home in one push and itself after them, the rest
 * wait. */
static void free_batch_elsewhere(const int cpus[2], size_t size)
{
    PCM_REQUIRE(pcm_test_pin(cpus[0]), "cannot pin to CPU %d", cpus[0]);
    unsigned most = pcm_bin_shapes[pcm_size_class(size)].outgoing;
    struct batch_handoff b = {cpus[1], size, 2 * most, {0}, 0, true, 0};
    PCM_REQUIRE(b.n <= BATCH, "%zu bytes: an outgoing limit of %u", size, most);
    for (unsigned i = 0; i < b.n; i++)
        PCM_REQUIRE(b.p[i] = pcm_malloc(size), "malloc failed");
    unsigned owner = pcm_span_of(pcm_segment_of(b.p[0]), b.p[0])->owner;
    for (unsigned i = 1; i < b.n; i++)
        if (pcm_span_of(pcm_segment_of(b.p[i]), b.p[i])->owner != owner)
            return; /* (a busy heap lock sent a refill elsewhere) */
    pcm_word_t remote_before = remote_link_below(owner, pcm_size_class(size));
    pthread_t t;
    PCM_REQUIRE(pthread_create(&t, NULL, free_batch_on_cpu, &b) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    PCM_REQUIRE(b.cpu >= 0, "cannot pin to CPU %d", cpus[1]);
    unsigned limit = b.limit;
    PCM_CHECK(limit >= 1 && limit <= most, "%zu bytes: CPU %d's outgoing limit %u, its most %u", size, cpus[1], limit,
              most);
    for (unsigned i = 2 * limit; i < b.n; i++)
        pcm_free(b.p[i]); /* (those the worker left) */
    b.n = 2 * limit;
    if (owner == (unsigned)cpus[1] || !limit)
        return;
    unsigned sent = limit + 1, seen;
    pcm_word_t remote = pcm_load_relaxed(pcm_remote_list(&pcm_heaps[owner], pcm_size_class(size)));
    PCM_CHECK(remote == (pcm_word_t)b.p[limit], "heap %u's remote top is %p, not the object freed "
              "when the outgoing list was full (%p)", owner, (void *)remote, b.p[limit]);
    /* Below it the batch, then what was there before. */
    pcm_word_t after = *(pcm_word_t *)remote;
    for (unsigned n = 0; n < limit && pcm_chain_more((void *)after); n++)
        after = *(pcm_word_t *)after;
    PCM_CHECK(after == remote_before, "heap %u's remote queue: the batch does not end on the old top", owner);
    /* The batch as a set: cut off the older queue for the walk. */
    pcm_word_t last = remote;
    for (unsigned n = 0; n < limit; n++)
        last = *(pcm_word_t *)last;
    pcm_word_t older = *(pcm_word_t *)last;
    *(pcm_word_t *)last = 0;
    PCM_CHECK(chain_holds(remote, b.p, sent, &seen) && seen == sent, "heap %u's remote queue holds %u objects that "
              "are not the first %u freed", owner, seen, sent);
    *(pcm_word_t *)last = older;
    PCM_CHECK(chain_holds(b.outgoing_after_free, b.p + sent, b.n - sent, &seen) && seen == b.n - sent,
              "CPU %d's outgoing list holds %u objects, not the last %u freed", cpus[1], seen, b.n - sent);
    /* The rest go home with CPU cpus[1]'s flush (malloc_trim). */
    PCM_REQUIRE(pcm_test_pin(cpus[1]), "cannot pin to CPU %d", cpus[1]);
    pcm_heap_flush_caches_rseq();
    PCM_CHECK(outgoing_top(cpus[1], pcm_size_class(size)) == 0, "CPU %d's outgoing list not empty after its flush",
              cpus[1]);
    pcm_test_printf("  %u objects of %zu bytes of heap %u freed on CPU %d: %u went home together, %u waited for the "
                    "flush\n", b.n, size, owner, cpus[1], sent, b.n - sent);
}
#endif

#ifdef PCM_ARCH_RSEQ
/* Two CPUs to run on, the allocator started, and the rseq fast path, with
 * the thread's affinity now in *saved (for restore_affinity): else say why
 * the test is skipped and return false. */
static bool two_cpus_on_rseq(int cpus[2], cpu_set_t *saved)
{
    allowed_cpus(cpus);
    started();
    if (!pcm_fast_path_is_rseq() || cpus[1] < 0) {
        pcm_test_printf("  skipped: fast path %s, second CPU %d\n", pcm_fast_path_name(), cpus[1]);
        return false;
    }
    sched_getaffinity(0, sizeof *saved, saved);
    return true;
}
#endif

#ifdef PCM_ARCH_RSEQ
/* A full outgoing list of `size` bytes' class on cpus[1] sends its
 * objects home to the remote stack of that class of their heap, cpus[0]'s,
 * and a flush of cpus[1] the rest, pushed on top: every object there
 * carries its depth on the stack.  With cpus[0]'s caches flushed, the next
 * malloc of the class there is a refill, which must take them into the
 * cache - not through the spans (the class's served count stays) - as
 * many as the cache has room for and one to hand out, with their depths;
 * only the rest go back to their spans. */
static void refill_from_remote_stack(const int cpus[2], size_t size)
{
    unsigned cls = pcm_size_class(size), limit = pcm_bin_shapes[cls].outgoing;
    PCM_REQUIRE(pcm_test_pin(cpus[0]), "cannot pin to CPU %d", cpus[0]);
    struct batch_handoff b = {cpus[1], size, 2 * limit, {0}, 0, false, 0};
    for (unsigned i = 0; i < b.n; i++)
        PCM_REQUIRE(b.p[i] = pcm_malloc(size), "malloc failed");
    unsigned owner = pcm_span_of(pcm_segment_of(b.p[0]), b.p[0])->owner;
    for (unsigned i = 0; i < b.n; i++)
        if (pcm_span_of(pcm_segment_of(b.p[i]), b.p[i])->owner != owner || owner != (unsigned)cpus[0])
            return; /* (a busy heap lock sent a refill elsewhere) */
    pthread_t t;
    PCM_REQUIRE(pthread_create(&t, NULL, free_batch_on_cpu, &b) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    PCM_REQUIRE(b.cpu >= 0, "cannot pin to CPU %d", cpus[1]);
    PCM_REQUIRE(pcm_test_pin(cpus[1]), "cannot pin to CPU %d", cpus[1]);
    pcm_heap_flush_caches_rseq(); /* the objects still on its outgoing list go home */
    PCM_REQUIRE(pcm_test_pin(cpus[0]), "cannot pin to CPU %d", cpus[0]);
    struct pcm_heap *h = &pcm_heaps[owner];
    unsigned seen;
    PCM_CHECK(chain_holds(pcm_load_relaxed(&h->remote_class[cls].top), b.p, b.n, &seen) && seen == b.n,
              "heap %u's remote stack of %zu bytes holds %u objects, not the %u freed on CPU %d", owner, size, seen,
              b.n, cpus[1]);
    unsigned at;
    PCM_CHECK(depths_count_down(pcm_load_relaxed(&h->remote_class[cls].top), &at),
              "heap %u's remote stack of %zu bytes: object %u from the top does not carry its depth", owner, size,
              at);
    pcm_heap_flush_caches_rseq(); /* this CPU's: the next malloc refills */
    PCM_REQUIRE(slot_top(cpus[0], cls) == 0, "CPU %d's cache not empty after its flush", cpus[0]);
    pcm_word_t returned = h->stats.returned[cls], served = h->stats.served[cls];
    pcm_word_t drained = h->stats.remote_drained;
    unsigned room = pcm_bin_limit(&h->bins[cls]), taken = room + 1 < b.n ? room + 1 : b.n;
    void *p = pcm_malloc(size);
    PCM_REQUIRE(p, "malloc failed");
    bool ours = false;
    for (unsigned i = 0; i < b.n && !ours; i++)
        ours = b.p[i] == p;
    PCM_CHECK(ours, "the refill handed out %p, not one of the objects on the remote stack", p);
    PCM_CHECK(pcm_load_relaxed(&h->remote_class[cls].top) == 0, "heap %u's remote stack not taken by the refill", owner);
    PCM_CHECK(chain_holds(slot_top(cpus[0], cls), b.p, b.n, &seen) && seen == taken - 1,
              "CPU %d's cache holds %u objects after the refill, not %u (its limit %u)", cpus[0], seen, taken - 1,
              room);
    PCM_CHECK(depths_count_down(slot_top(cpus[0], cls), &at),
              "CPU %d's cache after the refill: object %u from the top does not carry its depth", cpus[0], at);
    PCM_CHECK(h->stats.returned[cls] - returned == b.n - taken && h->stats.served[cls] == served,
              "through their spans: returned %lu -> %lu (%u over the cache's room), served %lu -> %lu",
              (unsigned long)returned, (unsigned long)h->stats.returned[cls], b.n - taken, (unsigned long)served,
              (unsigned long)h->stats.served[cls]);
    PCM_CHECK(h->stats.remote_drained - drained == b.n, "remote frees drained: %lu, not %u",
              (unsigned long)(h->stats.remote_drained - drained), b.n);
    pcm_free(p);
    pcm_test_printf("  %u objects of %zu bytes freed on CPU %d: the next refill on CPU %d took %u from the remote "
                    "stack (a cache limit of %u)\n", b.n, size, cpus[1], cpus[0], taken, room);
}
#endif

PCM_TEST(rseq_refill_takes_the_remote_stack_of_its_class_into_the_cache)
{
#ifdef PCM_ARCH_RSEQ
    int cpus[2];
    cpu_set_t saved;
    if (!two_cpus_on_rseq(cpus, &saved))
        return;
    unsigned delay = pcm_opts.purge_delay_ms;
    pcm_opts.purge_delay_ms = 3600000; /* no decay tick drains the stacks meanwhile */
    refill_from_remote_stack(cpus, 48);
    refill_from_remote_stack(cpus, 700);
    pcm_opts.purge_delay_ms = delay;
    restore_affinity(&saved);
#endif
}

#ifdef PCM_ARCH_RSEQ
#define STACKED 6u
/* A remote stack whose depths went wrong (remote.h: a push whose top was
 * taken and came back between its read of the top's depth and its CAS):
 * the refill on `cpu` that takes it must still hand out each of its
 * objects exactly once, whatever its top's depth (`stated`) says - taken
 * whole as it is where that fits the cache, walked where it does not. */
static void refill_from_stack_with_depth(int cpu, pcm_word_t stated)
{
    size_t size = 48;
    unsigned cls = pcm_size_class(size);
    void *p[STACKED];
    for (unsigned i = 0; i < STACKED; i++)
        PCM_REQUIRE(p[i] = pcm_malloc(size), "malloc failed");
    unsigned owner = pcm_span_of(pcm_segment_of(p[0]), p[0])->owner;
    bool mine = owner == (unsigned)cpu;
    for (unsigned i = 0; i < STACKED; i++)
        mine = mine && pcm_span_of(pcm_segment_of(p[i]), p[i])->owner == owner;
    if (!mine) { /* (a busy heap lock sent a refill elsewhere) */
        for (unsigned i = 0; i < STACKED; i++)
            pcm_free(p[i]);
        pcm_test_printf("  depth %lu: objects of another heap, skipped\n", (unsigned long)stated);
        return;
    }
    struct pcm_heap *h = &pcm_heaps[owner];
    pcm_heap_flush_caches_rseq(); /* this CPU's: the next malloc refills */
    pcm_heap_lock(h);
    pcm_heap_drain_remote_list_locked(h, &h->remote_class[cls].top);
    pcm_heap_unlock(h);
    PCM_REQUIRE(slot_top(cpu, cls) == 0, "CPU %d's cache not empty after its flush", cpu);
    /* p[0] on top, every depth below it 1, the bottom's link where a
     * pusher puts it (remote.c). */
    for (unsigned i = 0; i < STACKED; i++) {
        *(pcm_word_t *)p[i] = i + 1 < STACKED ? (pcm_word_t)p[i + 1] : pcm_heap_list_end(h, cls);
        pcm_free_mark_set(p[i], i == 0 ? stated : 1);
    }
    pcm_store_release(&h->remote_class[cls].top, (pcm_word_t)p[0]);
    unsigned times[STACKED] = {0};
    void *got[STACKED + 1];
    for (unsigned i = 0; i <= STACKED; i++) {
        PCM_REQUIRE(got[i] = pcm_malloc(size), "malloc failed");
        for (unsigned k = 0; k < STACKED; k++)
            times[k] += got[i] == p[k];
    }
    PCM_CHECK(pcm_load_relaxed(&h->remote_class[cls].top) == 0, "the remote stack not taken by the refill");
    for (unsigned k = 0; k < STACKED; k++)
        PCM_CHECK(times[k] == 1, "depth %lu on top: object %u of %u on the stack handed out %u times in %u mallocs",
                  (unsigned long)stated, k, STACKED, times[k], STACKED + 1);
    for (unsigned i = 0; i <= STACKED; i++)
        pcm_free(got[i]);
}
#endif

PCM_TEST(rseq_refill_takes_a_remote_stack_with_wrong_depths)
{
#ifdef PCM_ARCH_RSEQ
    int cpus[2];
    allowed_cpus(cpus);
    started();
    if (!pcm_fast_path_is_rseq() || cpus[0] < 0) {
        pcm_test_printf("  skipped: fast path %s\n", pcm_fast_path_name());
        return;
    }
    cpu_set_t saved;
    sched_getaffinity(0, sizeof saved, &saved);
    PCM_REQUIRE(pcm_test_pin(cpus[0]), "cannot pin to CPU %d", cpus[0]);
    unsigned delay = pcm_opts.purge_delay_ms;
    pcm_opts.purge_delay_ms = 3600000; /* no decay tick drains the stack meanwhile */
    refill_from_stack_with_depth(cpus[0], 2);              /* fewer than it holds: taken whole */
    refill_from_stack_with_depth(cpus[0], 40);             /* more: taken whole */
    refill_from_stack_with_depth(cpus[0], PCM_DEPTH_MASK); /* more than a cache takes: walked */
    pcm_opts.purge_delay_ms = delay;
    restore_affinity(&saved);
#endif
}

PCM_TEST(rseq_free_on_another_cpu_waits_on_its_outgoing_list_below_1_kib)
{
#ifdef PCM_ARCH_RSEQ
    PCM_CHECK(pcm_class_size(PCM_OUTGOING_CLASSES - 1) < PCM_FOREIGN_CACHED_MIN &&
                  pcm_class_size(PCM_OUTGOING_CLASSES) >= PCM_FOREIGN_CACHED_MIN,
              "the outgoing classes are not those below %u bytes", PCM_FOREIGN_CACHED_MIN);
    for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++) {
        size_t size = pcm_class_size(c);
        unsigned limit = pcm_bin_shapes[c].outgoing;
        PCM_CHECK(limit >= 1 && limit <= PCM_OUTGOING_LIMIT && (limit == 1 || limit * size <= PCM_OUTGOING_BYTES),
                  "class %u (%zu bytes): an outgoing limit of %u", c, size, limit);
    }
    int cpus[2];
    cpu_set_t saved;
    if (!two_cpus_on_rseq(cpus, &saved))
        return;
    /* Below 1 KiB: would share lines, or take the free's slow half again
     * at each later free there; they wait to go home. */
    free_elsewhere(cpus, 56, false);
    free_elsewhere(cpus, 200, false);
    free_elsewhere(cpus, 900, false);
    free_elsewhere(cpus, 3000, true); /* larger: cached where freed */
    free_elsewhere(cpus, 100000, true);
    free_batch_elsewhere(cpus, 56);  /* a list of 32 */
    free_batch_elsewhere(cpus, 900); /* of 17: at most 16 KiB */
    restore_affinity(&saved);
#endif
}

#ifdef PCM_ARCH_RSEQ
#define OBJECTS 3000u

struct without {
    int cpu_id; /* what the area says once unregistered: -1, or -2 written */
    int result;
};

/* Unregister glibc's rseq area for this thread: from then on the kernel
 * leaves cpu_id at -1, as for a thread it never gave one; or, written
 * here, -2, as glibc leaves it when the registration failed.  (x86_64's
 * free compares cpu_id's low 16 bits with the owner: 0xffff, 0xfffe.) */
static void *without_rseq(void *arg)
{
    struct without *w = arg;
    int *result = &w->result;
    struct rseq *area = (struct rseq *)((char *)__builtin_thread_pointer() + pcm_cpu_rseq_offset);
    /* glibc registers the original 32-byte area; __rseq_size is the
     * feature size (20 in Debian's 2.36), which the kernel would refuse. */
    unsigned length = __rseq_size < 32 ? 32 : __rseq_size;
    if (syscall(SYS_rseq, area, length, RSEQ_FLAG_UNREGISTER, RSEQ_SIG)) {
        *result = -errno;
        return NULL;
    }
    *result = 1;
    if (pcm_rseq_cpu() != -1) {
        *result = 2;
        return NULL;
    }
    area->cpu_id = (uint32_t)w->cpu_id;
    static unsigned char *objects[OBJECTS];
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < OBJECTS; i++) {
            size_t size = 1 + (i * 37) % 700;
            objects[i] = pcm_malloc(size);
            if (!objects[i]) {
                *result = 3;
                return NULL;
            }
            memset(objects[i], (int)(i & 0xff), size);
        }
        for (unsigned i = 0; i < OBJECTS; i++) {
            size_t size = 1 + (i * 37) % 700;
            for (size_t b = 0; b < size; b++)
                if (objects[i][b] != (unsigned char)(i & 0xff)) {
                    *result = 4;
                    return NULL;
                }
            pcm_free(objects[i]);
        }
    }
    *result = 0;
    return NULL;
}
#endif

#ifdef PCM_ARCH_RSEQ
/* Objects of one class, freed on another CPU than their heap's: all at
 * once, or one every SLOW_FREE_US. */
#define SPREAD_OBJECTS 2000u
#define SLOW_OBJECTS 80u
#define SLOW_FREE_US 50

struct spread {
    int cpu;
    unsigned cls, n;
    void **p;
    bool slowly;
    uint32_t most_seen, last; /* the list's limit: the most seen after a free, and at the end */
};

static void *free_spread_on_cpu(void *arg)
{
    struct spread *s = arg;
    if (!pcm_test_pin(s->cpu)) {
        s->cpu = -1;
        return NULL;
    }
    pcm_free(pcm_malloc(56)); /* the heap made ready (free_on_cpu) */
    const struct pcm_bin *list = &pcm_heaps[s->cpu].outgoing[s->cls];
    for (unsigned i = 0; i < s->n; i++) {
        if (s->slowly) {
            struct timespec nap = {0, SLOW_FREE_US * 1000};
            while (nanosleep(&nap, &nap) != 0)
                ;
        }
        pcm_free(s->p[i]);
        uint32_t limit = pcm_bin_limit(list);
        s->most_seen = limit > s->most_seen ? limit : s->most_seen;
    }
    s->last = pcm_bin_limit(list);
    return NULL;
}

/* n objects of cls made on cpus[0] and freed on cpus[1] (slowly or not);
 * *ours: whether they all came from cpus[0]'s heap (false also if the
 * test failed here). */
static void spread_objects(const int cpus[2], struct spread *s, void **p, unsigned n, bool slowly, bool *ours)
{
    *ours = false;
    PCM_REQUIRE(pcm_test_pin(cpus[0]), "cannot pin to CPU %d", cpus[0]);
    size_t size = pcm_class_size(s->cls);
    bool all = true;
    for (unsigned i = 0; i < n; i++) {
        PCM_REQUIRE(p[i] = pcm_malloc(size), "malloc failed");
        all &= pcm_span_of(pcm_segment_of(p[i]), p[i])->owner == (unsigned)cpus[0];
    }
    *s = (struct spread){cpus[1], s->cls, n, p, slowly, 0, 0};
    pthread_t t;
    PCM_REQUIRE(pthread_create(&t, NULL, free_spread_on_cpu, s) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    PCM_REQUIRE(s->cpu >= 0, "cannot pin to CPU %d", cpus[1]);
    *ours = all;
}

static void *spread_p[SPREAD_OBJECTS];
#endif

/* An outgoing list's limit follows its use (heap.h:
 * pcm_heap_outgoing_sent): a thread that frees another CPU's objects one
 * after another grows its list to the most, one push for many; one that
 * frees them only now and then takes it back to its start, so that few
 * wait there for a list that fills no more. */
PCM_TEST(rseq_outgoing_list_limit_follows_its_use)
{
#ifdef PCM_ARCH_RSEQ
    int cpus[2];
    cpu_set_t saved;
    if (!two_cpus_on_rseq(cpus, &saved))
        return;
    struct spread s = {.cls = pcm_size_class(56)};
    const struct pcm_bin_shape shape = pcm_bin_shapes[s.cls];
    PCM_REQUIRE(shape.outgoing_start < shape.outgoing, "56 bytes: outgoing start %u, most %u", shape.outgoing_start,
                shape.outgoing);
    bool ours;
    spread_objects(cpus, &s, spread_p, SPREAD_OBJECTS, false, &ours);
    if (ours) {
        pcm_test_printf("  %u objects freed at once on CPU %d: its outgoing limit reached %u (start %u, most %u)\n",
                        SPREAD_OBJECTS, cpus[1], s.most_seen, shape.outgoing_start, shape.outgoing);
        PCM_CHECK(s.most_seen == shape.outgoing, "the outgoing limit reached %u, not its most %u", s.most_seen,
                  shape.outgoing);
    }
    spread_objects(cpus, &s, spread_p, SLOW_OBJECTS, true, &ours);
    if (ours) {
        pcm_test_printf("  %u objects freed %d us apart: its outgoing limit %u at the end\n", SLOW_OBJECTS,
                        SLOW_FREE_US, s.last);
        PCM_CHECK(s.last == shape.outgoing_start, "the outgoing limit %u after slow frees, not its start %u", s.last,
                  shape.outgoing_start);
    }
    PCM_REQUIRE(pcm_test_pin(cpus[1]), "cannot pin to CPU %d", cpus[1]);
    pcm_heap_flush_caches_rseq(); /* (what waits on the list goes home) */
    restore_affinity(&saved);
#endif
}

PCM_TEST(rseq_thread_without_cpu_number_still_works)
{
#ifdef PCM_ARCH_RSEQ
    started();
    if (!pcm_fast_path_is_rseq()) {
        pcm_test_printf("  skipped: fast path is %s\n", pcm_fast_path_name());
        return;
    }
    for (int cpu_id = -1; cpu_id >= -2; cpu_id--) {
        pthread_t t;
        struct without w = {cpu_id, -1000};
        PCM_REQUIRE(pthread_create(&t, NULL, without_rseq, &w) == 0, "pthread_create failed");
        pthread_join(t, NULL);
        PCM_CHECK(w.result == 0, "cpu_id %d: result %d (negative: rseq unregister errno; 2: still a CPU number; "
                  "3: malloc failed; 4: contents changed)", cpu_id, w.result);
    }
#endif
}
