/*
 * heap.c - the span layer of the per-CPU heaps: cutting objects from spans
 * for a cache, taking them back, draining remote frees, growing into new
 * segments, and the heap locks.  The caches themselves are the fast
 * paths' business (cache_cas_slow.c, cache_rseq_slow.c).
 *
 * Everything with `_locked` in its name, and everything it calls, runs with
 * the heap's lock held; the lock is only ever tried (pcm_heap_trylock), and
 * a thread that cannot get one heap's lock uses another heap.  No malloc.
 */
#include "heap.h"

#include <errno.h>
#include <sched.h>

#include "decay.h"
#include "free_mark.h"
#include "hardening.h"
#include "init.h"
#include "os.h"
#include "remote.h"
#include "segment_pool.h"
#include "stats.h"
#include "yield_lock.h"

struct pcm_heap *pcm_heaps;
unsigned pcm_heap_count;
volatile pcm_word_t *pcm_heap_ready;
int pcm_fault_duplicate_refill;

/* Held while a heap is made ready, and across fork (pcm_heaps_lock_all).
 * One lock for all heaps: taken at most once per heap in a process's
 * life, never on an allocation's path after that. */
static volatile pcm_word_t prepare_lock;

/* A cache holds up to 64 KiB of one class (at most 1024 objects), but at
 * least 4 objects up to 64 KiB, or one object of a class above; a big
 * class up to 64 KiB (one object to a span, sizeclass.c) holds up to
 * PCM_BIG_CLASS_CACHE_BYTES of them: a CPU's caches hold at most 13.1 MiB
 * (tests/unit/cache_limit.c).  The floor of 4 lets a program take and give
 * back a few buffers of 16..64 KiB at a time without a refill and a flush
 * each time (threadtest's loop with batches of 3 objects of 40,000 bytes:
 * 34 M objects/s without it, 136 M with it, tcmalloc 151 M); above 64 KiB
 * it let those 18 classes alone hold 9 MiB more, and a refill of a class
 * above 64 KiB may empty the others' caches (heap.h:
 * pcm_heap_refill_plan).  With one object to a span, each object beyond
 * the cache's room costs a span cut and released: batches of 8 objects of
 * 20,000 bytes ran at 19 M objects/s with the floor of 4 alone, 330 M with
 * room for 12 (the span of 8 objects before: 99 M; tcmalloc 180-410 M);
 * batches of 16 of 40,000 bytes, more than the cache holds, at 14 M
 * (before: 41 M; mimalloc 41 M, jemalloc 4 M), 19.5 M with room for 9
 * (PCM_BIG_CLASS_CACHE_BYTES, heap.h).  A cache starts at 8 KiB's worth
 * (heap.h: pcm_heap_flushed_locked); a refill or a flush moves half its
 * limit, at most 64 objects, at least one. */
struct pcm_bin_shape pcm_bin_shapes[PCM_CLASS_COUNT];
#define CACHE_BYTES (64u * 1024)
#define CACHE_START_BYTES (8u * 1024)
#define CACHE_MIN 1u
#define CACHE_FLOOR 4u
#define CACHE_FLOOR_UP_TO (64u * 1024)
#define CACHE_MAX 1024u
#define BATCH_MAX 64u
/* Flushes in a row, with no refill, before a cache's limit halves. */
#define SHRINK_AFTER 16u
#define ADAPT_REFILLED 0x80u
/* A streak of refills of a class below 1 KiB that turns into a flush
 * within this many ns for each object of a batch after it began is quick
 * (heap.h)... */
#define GROW_NS_PER_OBJECT 250u
/* ...and one of this many refills is long; the bit of the heap's streak[]
 * that says it is of refills. */
#define STREAK_LONG 3u
#define STREAK_REFILLS 0x80u
/* An outgoing list's limit at first, and its least; it grows when it
 * filled within this many ns an object (heap.h: pcm_heap_outgoing_sent). */
#define OUTGOING_START 4u
#define OUTGOING_NS_PER_OBJECT 1000u

static uint32_t clamp_limit(uint32_t limit)
{
    return limit < CACHE_MIN ? CACHE_MIN : limit > CACHE_MAX ? CACHE_MAX : limit;
}

_Static_assert(CACHE_MAX * 2 <= PCM_DEPTH_MASK, "depth field holds a cache and a refill");

/* The mapping: the ready bitmap's page(s), PCM_HEAP_GUARDS heaps' room
 * never written, then the heaps.  Only the shapes are written here: each
 * heap's pages are first written when it is made ready, so the heaps of
 * CPUs that never allocate stay uncommitted. */
bool pcm_heaps_init(unsigned count)
{
    size_t bitmap = PCM_ALIGN_UP((count + PCM_WORD_BITS - 1) / PCM_WORD_BITS * sizeof(pcm_word_t), PCM_PAGE_SIZE);
    size_t guards = PCM_HEAP_GUARDS * sizeof(struct pcm_heap);
    size_t bytes = bitmap + guards + (size_t)count * sizeof(struct pcm_heap);
    char *map = pcm_os_map(bytes);
    if (!map)
        return false;
    /* A transparent huge page would commit 2 MiB of heaps at the first
     * write; the hint is best effort (the kernel may have THP off). */
    pcm_os_no_huge_pages(map, bytes);
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        uint32_t size = (uint32_t)pcm_class_size(c), most = clamp_limit(CACHE_BYTES / size);
        if (size <= CACHE_FLOOR_UP_TO && most < CACHE_FLOOR)
            most = CACHE_FLOOR;
        if (c >= PCM_CLASS_BIG_FIRST && size <= CACHE_FLOOR_UP_TO && PCM_BIG_CLASS_CACHE_BYTES / size > most)
            most = PCM_BIG_CLASS_CACHE_BYTES / size;
        pcm_bin_shapes[c].limit = most;
        pcm_bin_shapes[c].start = clamp_limit(CACHE_START_BYTES / size);
        uint32_t outgoing = PCM_OUTGOING_BYTES / size;
        pcm_bin_shapes[c].outgoing = outgoing < 1 ? 1 : outgoing > PCM_OUTGOING_LIMIT ? PCM_OUTGOING_LIMIT : outgoing;
        pcm_bin_shapes[c].outgoing_start =
            pcm_bin_shapes[c].outgoing < OUTGOING_START ? pcm_bin_shapes[c].outgoing : OUTGOING_START;
        unsigned end = c + 1;
        while (end < PCM_CLASS_COUNT && pcm_class_size(end) <= 2 * (size_t)size)
            end++;
        pcm_bin_shapes[c].stand_ins_end = end;
    }
    pcm_heap_ready = (volatile pcm_word_t *)map;
    pcm_heap_count = count;
    pcm_heaps = (struct pcm_heap *)(map + bitmap + guards);
    return true;
}

/* (The bitmap and the limits are what it guards.) */
static void prepare_lock_take(void)
{
    pcm_yield_lock_take(&prepare_lock);
}

static void prepare_lock_give(void)
{
    pcm_yield_lock_give(&prepare_lock);
}

bool pcm_lists_end_at_slots;

/* Every empty list of h holds its slot's address (heap.h).  Before its
 * limits open: a section that reads an open limit reads its slot after
 * it (x86: loads keep their order), so these stores are ordered before
 * the limits' (the fence; on x86 it only keeps the compiler from moving
 * them). */
static void end_list_at_slot(volatile pcm_pair_t *list)
{
    if (!pcm_load_relaxed(&list->half.ptr))
        pcm_store_relaxed(&list->half.ptr, pcm_list_end(list));
}

static void end_lists_at_slots(struct pcm_heap *h)
{
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++)
        end_list_at_slot(&h->bins[c].cache);
    for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++)
        end_list_at_slot(&h->outgoing[c].cache);
    pcm_fence_release();
}

void pcm_heaps_end_lists_at_slots(void)
{
    prepare_lock_take();
    pcm_lists_end_at_slots = true;
    for (unsigned i = 0; i < pcm_heap_count; i++)
        if (pcm_heap_is_ready(i))
            end_lists_at_slots(&pcm_heaps[i]);
    prepare_lock_give();
}

void pcm_heap_prepare_slow(struct pcm_heap *h)
{
    unsigned i = pcm_heap_index(h);
    prepare_lock_take();
    if (!pcm_heap_is_ready(i)) {
        if (pcm_lists_end_at_slots)
            end_lists_at_slots(h);
        pcm_heap_set_limits(h, true);
        /* Only the lock's holder writes the bitmap, so load and store
         * suffice.  release: the limits above are visible to whoever sees
         * the bit (pcm_heap_is_ready's acquire). */
        volatile pcm_word_t *word = &pcm_heap_ready[i / PCM_WORD_BITS];
        pcm_store_release(word, pcm_load_relaxed(word) | (pcm_word_t)1 << (i % PCM_WORD_BITS));
    }
    prepare_lock_give();
}

bool pcm_heap_trylock(struct pcm_heap *h)
{
    pcm_word_t expected = 0;
    if (pcm_load_relaxed(&h->lock)) /* don't bounce the line for nothing */
        return false;
    /* acquire: the span layer as the last holder left it */
    return pcm_cas_acquire(&h->lock, &expected, 1);
}

void pcm_heap_unlock(struct pcm_heap *h)
{
    pcm_store_release(&h->lock, 0);
}

/* When every heap is busy (as many holders as CPUs, some preempted), wait
 * with the CPU hint, and after a bounded spin yield the CPU to the holders.
 * Heaps that are not ready are passed over: locking one would commit its
 * pages for a heap no CPU uses. */
struct pcm_heap *pcm_heap_lock_any(struct pcm_heap *h)
{
    pcm_heap_prepare(h);
    unsigned first = pcm_heap_index(h);
    for (unsigned spins = 0;; spins++) {
        for (unsigned i = 0; i < pcm_heap_count; i++) {
            unsigned k = (first + i) % pcm_heap_count;
            if (pcm_heap_is_ready(k) && pcm_heap_trylock(&pcm_heaps[k]))
                return &pcm_heaps[k];
        }
        if (spins < 16)
            pcm_cpu_relax();
        else
            sched_yield();
    }
}

void pcm_heap_lock(struct pcm_heap *h)
{
    while (!pcm_heap_trylock(h))
        sched_yield();
}

void pcm_heaps_lock_all(void)
{
    prepare_lock_take();
    for (unsigned i = 0; i < pcm_heap_count; i++)
        if (pcm_heap_is_ready(i))
            pcm_heap_lock(&pcm_heaps[i]);
    pcm_segment_pool_lock(); /* innermost: taken under heap locks */
}

void pcm_heaps_unlock_all(void)
{
    pcm_segment_pool_unlock();
    for (unsigned i = 0; i < pcm_heap_count; i++)
        if (pcm_heap_is_ready(i))
            pcm_heap_unlock(&pcm_heaps[i]);
    prepare_lock_give();
}

/* ---- each cache's limit (lock held) ---- */

/* Relaxed stores: on a drain the fences around them order them against
 * the sections; at start-up the ready bit's release publishes them. */
void pcm_heap_set_limits(struct pcm_heap *h, bool open)
{
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        pcm_bin_set_limit(&h->bins[c], open ? pcm_bin_shapes[c].start : 0);
        if (open) /* a reopened cache starts afresh, as a new one */
            h->adapt[c] = 0;
    }
    for (unsigned c = 0; c < PCM_OUTGOING_CLASSES; c++)
        pcm_bin_set_limit(&h->outgoing[c], open ? pcm_bin_shapes[c].outgoing_start : 0);
}

/* A list's limit doubled (up to most) or halved (down to least); a limit
 * of 0 (stopped by a drain) is left to the drain. */
static uint32_t resized(uint32_t limit, bool grow, uint32_t least, uint32_t most)
{
    if (limit && grow && limit < most)
        return limit * 2 < most ? limit * 2 : most;
    if (limit && !grow && limit > least)
        return limit / 2 > least ? limit / 2 : least;
    return limit;
}

/* Double cls's cache (up to its most), or halve it (down to its start). */
static void resize_cache(struct pcm_heap *h, unsigned cls, bool grow)
{
    struct pcm_bin *bin = &h->bins[cls];
    uint32_t limit = pcm_bin_limit(bin);
    uint32_t next = resized(limit, grow, pcm_bin_shapes[cls].start, pcm_bin_shapes[cls].limit);
    if (next != limit)
        pcm_bin_set_limit(bin, next);
}

/* A refill (refill) or a flush of cls, a class below 1 KiB (heap.h): the
 * streak of them in one direction goes on, or turns.  A turn from refills
 * to a flush grows the cache if the refills were many (STREAK_LONG) or
 * began soon before it, and halves it otherwise; a turn from flushes to a
 * refill only starts the refills' streak.  h->streak[cls]: STREAK_REFILLS
 * if the streak is of refills, and its events (up to STREAK_LONG); the
 * clock is read only at a turn, where a streak begins. */
static void streak_event(struct pcm_heap *h, unsigned cls, bool refill)
{
    unsigned streak = h->streak[cls], events = streak & ~STREAK_REFILLS;
    if (((streak & STREAK_REFILLS) != 0) == refill) {
        if (events < STREAK_LONG)
            h->streak[cls] = (uint8_t)(streak + 1);
        return;
    }
    uint32_t now = pcm_os_monotonic_ns32();
    if (!refill) { /* (a turn to refills leaves it: the flushes that grow it come next) */
        bool soon = now - h->event_ns[cls] < pcm_heap_batch(h, cls) * GROW_NS_PER_OBJECT;
        resize_cache(h, cls, events >= STREAK_LONG || soon);
    }
    h->event_ns[cls] = now;
    h->streak[cls] = (uint8_t)((refill ? STREAK_REFILLS : 0) | 1u);
}

void pcm_heap_refilled_locked(struct pcm_heap *h, unsigned cls, bool cut)
{
    if (cut && cls < PCM_OUTGOING_CLASSES)
        streak_event(h, cls, true);
    h->adapt[cls] = cut ? ADAPT_REFILLED : 0;
    /* this CPU still allocates (heap.h) */
    pcm_store_relaxed(&h->activity, h->activity + 1);
}

void pcm_heap_flushed_locked(struct pcm_heap *h, unsigned cls)
{
    unsigned adapt = h->adapt[cls];
    if (cls < PCM_OUTGOING_CLASSES)
        streak_event(h, cls, false);
    if (adapt & ADAPT_REFILLED) {
        adapt = 0;
        if (cls >= PCM_OUTGOING_CLASSES) /* (the smaller ones: by their streaks) */
            resize_cache(h, cls, true);
    } else if (cls < PCM_CLASS_BIG_FIRST && ++adapt == SHRINK_AFTER) { /* (never a big class's: heap.h) */
        adapt = 0;
        resize_cache(h, cls, false);
    }
    h->adapt[cls] = (uint8_t)adapt;
}

void pcm_heap_outgoing_sent(struct pcm_heap *h, unsigned cls)
{
    uint32_t now = pcm_os_monotonic_ns32();
    uint32_t since = now - (uint32_t)pcm_load_relaxed(&h->outgoing_sent_ns[cls]);
    pcm_store_relaxed(&h->outgoing_sent_ns[cls], now);
    uint32_t limit = pcm_bin_limit(&h->outgoing[cls]), most = pcm_bin_shapes[cls].outgoing;
    uint32_t least = pcm_bin_shapes[cls].outgoing_start;
    bool fast = since < limit * OUTGOING_NS_PER_OBJECT;
    if ((fast ? limit >= most : limit <= least) || !pcm_heap_trylock(h))
        return; /* (no change, or h busy: the limit stays as it is) */
    limit = pcm_bin_limit(&h->outgoing[cls]); /* (now under the lock) */
    uint32_t next = resized(limit, fast, least, most);
    if (next != limit)
        pcm_bin_set_limit(&h->outgoing[cls], next);
    pcm_heap_unlock(h);
}

uint32_t pcm_heap_room(const struct pcm_heap *h, unsigned cls)
{
    uint32_t limit = pcm_bin_limit(&h->bins[cls]);
    return limit ? limit : pcm_bin_shapes[cls].start; /* (0: stopped by a drain) */
}

unsigned pcm_heap_batch(const struct pcm_heap *h, unsigned cls)
{
    uint32_t batch = pcm_heap_room(h, cls) / 2;
    return batch > BATCH_MAX ? BATCH_MAX : batch ? batch : 1;
}

unsigned pcm_heap_refill_plan(const struct pcm_heap *h, unsigned cls, bool *others_home)
{
    *others_home = false;
    if (cls < PCM_CLASS_BIG_FIRST)
        return pcm_heap_batch(h, cls);
    size_t idle = pcm_class_size(cls);
    bool others = false;
    for (unsigned c = PCM_CLASS_BIG_FIRST; c < PCM_CLASS_COUNT; c++) {
        if (c != cls && pcm_bin_listed_hint(&h->bins[c])) {
            others = true;
            idle += pcm_class_size(c);
        }
    }
    *others_home = idle > PCM_BIG_IDLE_BYTES;
    return others ? 1 : pcm_heap_batch(h, cls);
}

/* ---- the partial list of a bin (lock held) ---- */

static void list_add(struct pcm_bin *bin, struct pcm_span *span)
{
    span->prev = NULL;
    span->next = bin->partial;
    if (bin->partial)
        bin->partial->prev = span;
    bin->partial = span;
    span->listed = 1;
}

static void list_remove(struct pcm_bin *bin, struct pcm_span *span)
{
    if (span->prev)
        span->prev->next = span->next;
    else
        bin->partial = span->next;
    if (span->next)
        span->next->prev = span->prev;
    span->prev = span->next = NULL;
    span->listed = 0;
}

/* Whether span can still give out an object: the condition for being on
 * its bin's partial list (segment.h's span invariants). */
static bool span_can_give(const struct pcm_span *span)
{
    return span->free || span->carved < pcm_span_capacity(span);
}

/* ---- spans (lock held) ---- */

/* Segments a search for spare pages looks at besides the last one a span
 * went back to: a heap of a thousand segments must not scan them all for
 * each span it cuts. */
#define SEARCH_SEGMENTS 8u

struct place {
    struct pcm_segment *segment; /* NULL: none yet */
    size_t first, fresh;
};

/* Offer s (with `spare` spare pages; 0: first fit) to *best: taken if a
 * span there commits fewer new pages. */
static void consider(struct place *best, struct pcm_segment *s, size_t pages, size_t spare)
{
    size_t at, fresh = pcm_segment_place_span(s, pages, spare, best->fresh, &at);
    if (fresh < best->fresh)
        *best = (struct place){s, at, fresh};
}

/* Where a new span goes.  First fit, unless a span went back to its
 * segment since a search last found no spare page: then the place that
 * commits the fewest new pages (pcm_segment_place_span; one with none ends
 * the search) in the segment of the last release and the first
 * SEARCH_SEGMENTS of the list (the newest), and first fit in the rest if
 * none of them has room.  A program that only grows never pays for a
 * search.  With huge pages a first touch makes free pages spare too
 * (pcm_segment_touched). */
static struct place place_span_locked(struct pcm_heap *h, size_t pages)
{
    struct place best = {NULL, 0, SIZE_MAX};
    struct pcm_segment *s = h->segments;
    if (h->spare_hint || pcm_opts.hugepages) {
        bool spare_seen = false;
        if (h->spare_hint) {
            size_t spare = pcm_segment_spare_pages(h->spare_hint);
            spare_seen = spare != 0;
            consider(&best, h->spare_hint, pages, spare);
        }
        for (unsigned looked = 0; s && best.fresh && looked < SEARCH_SEGMENTS; s = s->next, looked++) {
            if (s == h->spare_hint)
                continue;
            size_t spare = pcm_segment_spare_pages(s);
            spare_seen |= spare != 0;
            consider(&best, s, pages, spare);
        }
        /* All of them seen, none spare (a search that stopped early saw
         * some): none until the next span goes back. */
        if (!s && !spare_seen)
            h->spare_hint = NULL;
    }
    for (; s && !best.segment; s = s->next)
        consider(&best, s, pages, 0);
    return best;
}

static struct pcm_span *span_create_locked(struct pcm_heap *h, unsigned cls)
{
    size_t pages = pcm_class_span_pages(cls);
    struct place best = place_span_locked(h, pages);
    /* h commits pages it does not have: CPUs gone idle give theirs back */
    if (!best.segment || best.fresh)
        pcm_decay_reclaim(h);
    struct pcm_span *span;
    if (best.segment) {
        span = pcm_segment_span_cut(best.segment, best.first, cls, pages);
    } else {
        struct pcm_segment *s = pcm_segment_create(pcm_heap_index(h));
        if (!s)
            return NULL;
        s->next = h->segments;
        h->segments = s;
        pcm_store_relaxed(&h->segment_count, h->segment_count + 1);
        span = pcm_segment_span_create(s, cls, pages); /* (a new segment has room) */
    }
    struct pcm_heap_stats *stats = &h->stats;
    stats->spans_created++;
    if (++stats->spans[cls] > stats->peak_spans[cls])
        stats->peak_spans[cls] = stats->spans[cls];
    return span;
}

/* A span of h went back to segment s: its pages are spare. */
static void span_released_locked(struct pcm_heap *h, struct pcm_segment *s, struct pcm_span *span)
{
    h->stats.spans[span->class_plus1 - 1u]--;
    pcm_segment_span_release(s, span);
    h->spare_hint = s;
    h->stats.spans_released++;
}

/* n objects, already linked onto span's free list, came back to it. */
static inline __attribute__((always_inline)) void span_returned_locked(struct pcm_heap *h, struct pcm_segment *s,
                                                                       struct pcm_span *span, uint32_t n)
{
    unsigned cls = span->class_plus1 - 1u;
    struct pcm_bin *bin = &h->bins[cls];
    span->active = 1;
    span->trimmed = 0;
    span->used -= n;
    h->stats.returned[cls] += n;
    if (!span->listed)
        list_add(bin, span);
    /* Every object is home: give the pages back to the segment, unless
     * this is the bin's only span (keeps a malloc/free loop from cutting
     * and releasing a span each time: the cache keeps a big class's one
     * object instead, sizeclass.c). */
    if (span->used == 0 && (cls >= PCM_CLASS_BIG_FIRST || bin->partial != span || span->next)) {
        list_remove(bin, span);
        span_released_locked(h, s, span);
    }
}

void pcm_heap_return_locked(struct pcm_heap *h, void *obj)
{
    struct pcm_segment *s = pcm_segment_of(obj);
    struct pcm_span *span = pcm_span_of(s, obj);
    *(pcm_word_t *)obj = pcm_link_encode(obj, (pcm_word_t)span->free);
    pcm_free_mark_set(obj, 0);
    span->free = obj;
    span_returned_locked(h, s, span, 1);
}

/* Objects freed together mostly come from one span (a cache flush gives
 * back what was allocated together), so each run of them that lies in one
 * span goes onto its free list in one splice, with one update of the
 * span: a few instructions per object instead of a span update each.
 * Returns up to `max` objects of chain, stops there and hands back the
 * rest; *home counts those that went to h's own spans. */
static void *return_runs_locked(struct pcm_heap *h, void *chain, size_t max, size_t *home)
{
    const unsigned self = pcm_heap_index(h);
    size_t left = max, home_count = 0;
    while (pcm_chain_more(chain) && left) {
        void *first = chain, *last = chain;
        struct pcm_segment *s = pcm_segment_of(first);
        struct pcm_span *span = pcm_span_of(s, first);
        const uintptr_t start = span->start, bytes = (uintptr_t)span->pages << PCM_PAGE_SHIFT;
        /* The run ends at the span's edge, at max, or at the chain's end:
         * NULL - start wraps to at least 2^N - start >= bytes, as no span
         * runs past the top of the address space, and a slot (heap.h:
         * pcm_chain_more) lies in no span, so one compare stops at all. */
        void *next = pcm_link_next(last, *(pcm_word_t *)last);
        size_t before = left--;
        for (; left && (uintptr_t)next - start < bytes; left--) {
            last = next;
            next = pcm_link_next(last, *(pcm_word_t *)last);
        }
        uint32_t n = (uint32_t)(before - left);
        chain = next;
        if (__builtin_expect(span->owner != self, 0)) {
            pcm_remote_free_chain(&pcm_heaps[span->owner], span->class_plus1 - 1u, first, last, n);
            continue;
        }
        *(pcm_word_t *)last = pcm_link_encode(last, (pcm_word_t)span->free);
        span->free = first;
        span_returned_locked(h, s, span, n);
        home_count += n;
    }
    *home = home_count;
    return pcm_chain_more(chain) ? chain : NULL;
}

size_t pcm_heap_return_chain_locked(struct pcm_heap *h, void *chain)
{
    size_t home;
    return_runs_locked(h, chain, SIZE_MAX, &home);
    return home;
}

void *pcm_heap_return_first_locked(struct pcm_heap *h, void *chain, size_t n)
{
    size_t home;
    return return_runs_locked(h, chain, n, &home);
}

/* The whole of one of h's remote stacks, or NULL. */
static void *take_remote_list(volatile pcm_word_t *list)
{
    /* A look first: most refills and flushes find the stack empty, and a
     * load leaves the line shared where a swap would take it over. */
    if (!pcm_load_relaxed(list))
        return NULL;
    /* acq_rel: acquire pairs with the pushers' release CAS */
    return (void *)pcm_swap_acq_rel(list, 0);
}

void pcm_heap_drain_remote_list_locked(struct pcm_heap *h, volatile pcm_word_t *list)
{
    void *chain = take_remote_list(list);
    if (chain)
        h->stats.remote_drained += pcm_heap_return_chain_locked(h, chain);
}

void pcm_heap_drain_remote_locked(struct pcm_heap *h, bool all_classes)
{
    pcm_heap_drain_remote_list_locked(h, &h->remote.top);
    for (unsigned c = 0; all_classes && c < PCM_OUTGOING_CLASSES; c++)
        pcm_heap_drain_remote_list_locked(h, &h->remote_class[c].top);
}

unsigned pcm_heap_take_remote_class_locked(struct pcm_heap *h, unsigned cls, unsigned most, void **first)
{
    void *chain = take_remote_list(&h->remote_class[cls].top);
    /* Its pushers marked every object with its depth (remote.h), so a
     * stack that fits is ready as it is: no walk over objects whose lines
     * the CPUs that freed them hold.  (A stale depth only misstates the
     * count, never the chain: see remote.h.) */
    pcm_word_t depth = chain ? *pcm_object_word1(chain) & PCM_DEPTH_MASK : 0;
    if (depth && depth <= most) {
        h->stats.remote_drained += depth;
        h->stats.refills++;
        *first = chain;
        return (unsigned)depth;
    }
    /* Else one pass: each object taken is relinked in front of the last,
     * so the first taken ends up the bottom (depth 1) and the last the
     * top. */
    void *top = (void *)pcm_heap_list_end(h, cls); /* the bottom's link: ready for the cache */
    unsigned count = 0;
    while (pcm_chain_more(chain) && count < most) {
        void *next = pcm_link_next(chain, *(pcm_word_t *)chain);
        *(pcm_word_t *)chain = pcm_link_encode(chain, (pcm_word_t)top);
        pcm_free_mark_set(chain, ++count);
        top = chain;
        chain = next;
    }
    if (pcm_chain_more(chain))
        h->stats.remote_drained += pcm_heap_return_chain_locked(h, chain);
    if (count) {
        h->stats.remote_drained += count;
        h->stats.refills++;
    }
    *first = top;
    return count;
}

/* Link obj after *tail, the last object of a chain that hangs off *head
 * (tail == head: the chain is empty), so appending needs no first-object
 * test.  The hardened build encodes every link an object holds, but not
 * the head's: a local word, in no segment. */
static inline void chain_append(pcm_word_t *head, pcm_word_t **tail, pcm_word_t obj)
{
    if (PCM_HARDENED_BUILD && *tail == head)
        *head = obj;
    else
        **tail = pcm_link_encode(*tail, obj);
    *tail = (pcm_word_t *)obj;
}

unsigned pcm_heap_cut_locked(struct pcm_heap *h, unsigned cls, unsigned want, bool depths, void **first_out,
                             void **last_out)
{
    struct pcm_bin *bin = &h->bins[cls];
    pcm_word_t head = 0, *last = &head; /* chain_append */
    unsigned count = 0;
    while (count < want) {
        struct pcm_span *span = bin->partial;
        if (!span) {
            span = span_create_locked(h, cls);
            if (!span)
                break;
            list_add(bin, span);
        }
        unsigned before = count;
        span->active = 1;
        span->trimmed = 0;
        /* Objects given back to the span first (their pages are warm)... */
        for (pcm_word_t *obj; count < want && (obj = span->free) != NULL; count++) {
            span->free = pcm_link_next(obj, obj[0]);
            chain_append(&head, &last, (pcm_word_t)obj);
            if (depths)
                pcm_free_mark_set(obj, want - count);
        }
        /* ...then a run of fresh ones, contiguous, cut in one go. */
        uint32_t fresh = pcm_span_capacity(span) - span->carved;
        if (fresh > want - count)
            fresh = want - count;
        if (fresh) {
            uintptr_t from = span->start + (uintptr_t)span->carved * span->object_size;
            uintptr_t to = from + (uintptr_t)fresh * span->object_size;
            pcm_hardened_carved(from, fresh, span->object_size);
            if (depths) {
                /* marked in the same pass: each line is written once */
                pcm_word_t depth = want - count;
                for (uintptr_t obj = from; obj < to; obj += span->object_size) {
                    chain_append(&head, &last, obj);
                    pcm_free_mark_set((void *)obj, depth--);
                }
            } else {
                for (uintptr_t obj = from; obj < to; obj += span->object_size)
                    chain_append(&head, &last, obj);
            }
            pcm_span_set_carved(span, span->carved + fresh);
            count += fresh;
            pcm_segment_touched(pcm_segment_of((void *)span->start), from, to);
        }
        span->used += count - before;
        if (!span_can_give(span))
            list_remove(bin, span);
    }
    void *first = (void *)head;
    if (count) {
        last[0] = pcm_link_encode(last, 0);
        pcm_hardened_shuffle(pcm_heap_index(h), &first, (void **)&last, count);
        /* depths were counted from want; the shuffle reorders */
        if (depths && (count != want || PCM_HARDENED_BUILD))
            pcm_chain_mark_depths(first, count, count);
        h->stats.refills++;
        h->stats.served[cls] += count;
    }
    *first_out = first;
    *last_out = count ? last : NULL;
    return count;
}

void pcm_chain_mark_depths(void *chain, unsigned count, pcm_word_t top)
{
    for (void *obj = chain;; obj = pcm_link_next(obj, *(pcm_word_t *)obj)) {
        pcm_free_mark_set(obj, top--);
        if (--count == 0)
            return;
    }
}

void pcm_heap_release_empty_spans_locked(struct pcm_heap *h)
{
    /* Spans with no object out, kept only as their bin's last span. */
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        struct pcm_span *span = h->bins[c].partial;
        while (span) {
            struct pcm_span *next = span->next;
            if (span->used == 0) {
                list_remove(&h->bins[c], span);
                span_released_locked(h, pcm_segment_of((void *)span->start), span);
            }
            span = next;
        }
    }
}

/* Give back the free pages of h's partial spans - of all of them, or
 * (idle_only) of those neither cut from nor given objects since the last
 * call; every span's activity starts afresh.  A span trimmed since its
 * last activity has nothing more to give: its free list is as the trim
 * left it, so it is not walked again. */
static size_t trim_spans_locked(struct pcm_heap *h, bool idle_only)
{
    size_t released = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        for (struct pcm_span *span = h->bins[c].partial, *next; span; span = next) {
            next = span->next;
            bool active = span->active;
            span->active = 0;
            if (span->trimmed || (idle_only && active))
                continue;
            released += pcm_span_trim_free_pages(pcm_segment_of((void *)span->start), span);
            span->trimmed = 1;
            if (!span_can_give(span))
                list_remove(&h->bins[c], span);
        }
    }
    return released;
}

size_t pcm_heap_decay_spans_locked(struct pcm_heap *h, bool all)
{
    return trim_spans_locked(h, !all);
}

void pcm_heap_pool_empty_segments_locked(struct pcm_heap *h, bool idle_only)
{
    if (!pcm_segment_pool_enabled())
        return;
    for (struct pcm_segment **link = &h->segments, *s; (s = *link) != NULL;) {
        if (!pcm_segment_is_empty(s) || (idle_only && !s->was_empty)) {
            link = &s->next;
            continue;
        }
        *link = s->next;
        pcm_segment_pool_release(s);
        if (h->spare_hint == s)
            h->spare_hint = NULL;
        pcm_store_relaxed(&h->segment_count, h->segment_count - 1);
    }
}

static size_t give_back_locked(struct pcm_heap *h, bool span_pages)
{
    pcm_heap_drain_remote_locked(h, true);
    pcm_heap_release_empty_spans_locked(h);
    /* Spans that still hold objects: the pages among them with none. */
    size_t released = span_pages ? trim_spans_locked(h, false) : 0;
    for (struct pcm_segment *s = h->segments; s; s = s->next)
        released += pcm_segment_decommit_free(s);
    pcm_heap_pool_empty_segments_locked(h, false);
    return released;
}

size_t pcm_heap_trim_locked(struct pcm_heap *h)
{
    return give_back_locked(h, true);
}

size_t pcm_heap_reclaim_locked(struct pcm_heap *h)
{
    return give_back_locked(h, false);
}
