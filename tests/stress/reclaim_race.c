/*
 * tests/stress/reclaim_race.c - heaps given back while other CPUs use
 * their objects (decay.h: pcm_decay_reclaim), with more threads than
 * cores.
 *
 * The workers move together between two CPUs with heaps of their own
 * (two_heaps.h), every EPOCH_MS, as a conductor thread says.  The heap
 * they leave goes idle, and the one they come to grows: each worker keeps
 * a hoard that grows through the epoch, so spans keep needing fresh pages
 * and the growing heap keeps calling the reclaim, which gives back the
 * idle heap's free memory - drains its remote frees, releases its empty
 * spans, decommits its pages in no span.  Meanwhile:
 *   - each worker frees the hoard of the epoch before on the new CPU:
 *     remote frees to the heap being reclaimed;
 *   - objects cross between workers through shared slots, so they are
 *     freed by another thread, often on the other CPU;
 *   - one worker calls malloc_trim(0) now and then;
 *   - one worker, the straggler, stays on both CPUs: in one epoch of
 *     three it works in short bursts, STRAGGLE_MS apart, mostly on the
 *     idle CPU (the other one is busy) - on the idle heap now and then,
 *     at any point of a reclaim, sometimes just late enough to be taken
 *     for gone.  In the other epochs it sleeps, so that the idle heap is
 *     idle, as a heap must be for the reclaim to come.
 * When the workers come back to a heap, its caches are as they left them
 * and its pages in no span may be gone.
 *
 * Every object carries a label (its size and tag, each xor'd with a key
 * from its address) and its pattern (pattern.h) after it, written when it
 * is allocated and checked completely before it is freed; each worker's
 * objects are also checked every CHECK_EVERY operations.  A page given
 * back under a live object reads as zeroes, and an object handed out
 * twice gets two labels: either fails a check.  The run must count a
 * reclaim, or it did not test what it is for: it goes on past its epochs
 * until one came, up to EPOCHS_MOST times as many.  On the CAS path a
 * refill whose heap's lock is busy takes the other heap's
 * (pcm_heap_lock_any), so with eight workers on one CPU the idle heap
 * often keeps refilling and is not idle; in the hardened build, whose
 * refills hold the lock longer, 4 runs in 20 counted no reclaim within
 * the 24 epochs.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "heap.h"
#include "pattern.h"
#include "two_heaps.h"

#define EPOCH_MS 20l
/* Epochs of a run (PCM_TEST_SCALE applies), at least EPOCHS_MIN. */
#define EPOCHS 24ul
#define EPOCHS_MIN 6ul
#define EPOCHS_MOST 8ul
#define LIVE 64u
#define HOARD_MOST 256u
#define SLOT_COUNT 256u
#define CHECK_EVERY 512u
#define TRIM_EVERY 4096u
#define LABEL_BYTES 16u
#define STRAGGLER 1u
#define STRAGGLE_STEPS 64u
#define STRAGGLE_MS 6l

struct object {
    unsigned char *p;
    size_t size;
    uint64_t tag; /* (worker + 1) << 40 | serial */
};

struct run {
    struct two_heaps cpus;
    unsigned workers;
    uint64_t seed;
    unsigned long epochs; /* at least; more until a reclaim came */
    unsigned long epoch;  /* the conductor's */
    int end;              /* the conductor's: the workers stop */
    pcm_word_t reclaims_before;
    unsigned char **slots;
    /* counted with __atomic adds */
    unsigned long allocated, hoard_freed_elsewhere, traded, trims;
    int stop; /* set at the first failed check */
};

/* ---- objects ---- */

static uint64_t label_key(const void *p, unsigned which)
{
    return pcm_pattern_mix((uint64_t)(uintptr_t)p * 2 + which);
}

static size_t between(uint64_t *rng, size_t low, size_t high)
{
    return low + (size_t)(pcm_test_rand(rng) % (high - low + 1));
}

/* Mostly small: 16 B..2 KiB, one in 16 up to 32 KiB. */
static size_t table_size(uint64_t *rng)
{
    return pcm_test_rand(rng) % 16 ? between(rng, LABEL_BYTES, 2048) : between(rng, 2049, 32768);
}

static void failed(struct run *run)
{
    __atomic_store_n(&run->stop, 1, __ATOMIC_RELAXED);
}

static bool object_new(struct run *run, unsigned worker, size_t size, uint64_t *serial, struct object *o)
{
    o->size = size;
    o->tag = (uint64_t)(worker + 1) << 40 | ++*serial;
    o->p = pcm_malloc(size);
    if (!o->p) {
        PCM_CHECK(0, "malloc(%zu) failed (%u workers)", size, run->workers);
        failed(run);
        return false;
    }
    uint64_t label[2] = {(uint64_t)size ^ label_key(o->p, 0), o->tag ^ label_key(o->p, 1)};
    memcpy(o->p, label, sizeof label);
    pcm_pattern_fill(o->p + LABEL_BYTES, size - LABEL_BYTES, o->tag);
    __atomic_fetch_add(&run->allocated, 1, __ATOMIC_RELAXED);
    return true;
}

/* The object at p as its label describes it; false (reported) if the
 * label is not one this run wrote. */
static bool object_read(struct run *run, unsigned char *p, struct object *o)
{
    uint64_t label[2];
    memcpy(label, p, sizeof label);
    o->p = p;
    o->size = (size_t)(label[0] ^ label_key(p, 0));
    o->tag = label[1] ^ label_key(p, 1);
    unsigned worker = (unsigned)(o->tag >> 40);
    if (o->size >= LABEL_BYTES && o->size <= 32768 && worker >= 1 && worker <= run->workers)
        return true;
    PCM_CHECK(0, "object %p has a corrupt label: %zu bytes, tag %llx (%u workers)", (void *)p, o->size,
              (unsigned long long)o->tag, run->workers);
    failed(run);
    return false;
}

/* Check o completely; false (reported) if anything changed. */
static bool object_check(struct run *run, struct object o, const char *when)
{
    struct object now;
    if (!object_read(run, o.p, &now))
        return false;
    if (now.size != o.size || now.tag != o.tag) {
        PCM_CHECK(0, "%s: object %p of %zu bytes, tag %llx: its label now says %zu bytes, tag %llx (%u workers)",
                  when, (void *)o.p, o.size, (unsigned long long)o.tag, now.size, (unsigned long long)now.tag,
                  run->workers);
        failed(run);
        return false;
    }
    size_t bad = pcm_pattern_check(o.p + LABEL_BYTES, o.size - LABEL_BYTES, o.tag);
    if (bad == PCM_PATTERN_OK)
        return true;
    PCM_CHECK(0, "%s: object %p of %zu bytes, tag %llx: byte %zu is 0x%x, expected 0x%x (%u workers)", when,
              (void *)o.p, o.size, (unsigned long long)o.tag, bad + LABEL_BYTES, o.p[LABEL_BYTES + bad],
              pcm_pattern_expected(o.p + LABEL_BYTES, o.size - LABEL_BYTES, o.tag, bad), run->workers);
    failed(run);
    return false;
}

/* Check o and free it; a corrupt object is left alone (freeing it could
 * hide or confuse the report). */
static bool object_release(struct run *run, struct object *o, const char *when)
{
    if (!o->p)
        return true;
    if (!object_check(run, *o, when))
        return false;
    pcm_free(o->p);
    o->p = NULL;
    return true;
}

/* Swap p (or NULL) into a slot; check and free what was there. */
static bool slot_exchange(struct run *run, unsigned slot, unsigned char *p)
{
    unsigned char *old = __atomic_exchange_n(&run->slots[slot], p, __ATOMIC_ACQ_REL);
    struct object o;
    if (!old)
        return true;
    __atomic_fetch_add(&run->traded, 1, __ATOMIC_RELAXED);
    return object_read(run, old, &o) && object_release(run, &o, "taken from a slot");
}

/* ---- the workers and their conductor ---- */

struct worker {
    struct object live[LIVE], hoard[HOARD_MOST];
    unsigned hoarded;
    uint64_t rng, serial;
};

static bool release_all(struct run *run, struct object *objects, unsigned count, const char *when)
{
    for (unsigned i = 0; i < count; i++)
        if (!object_release(run, &objects[i], when))
            return false;
    return true;
}

static bool check_all(struct run *run, const struct object *objects, unsigned count)
{
    for (unsigned i = 0; i < count; i++)
        if (objects[i].p && !object_check(run, objects[i], "while live"))
            return false;
    return true;
}

/* One step of a worker's work; false on a failed check. */
static bool step(struct run *run, unsigned index, struct worker *w)
{
    unsigned pick = (unsigned)(pcm_test_rand(&w->rng) % 100);
    unsigned i = (unsigned)(pcm_test_rand(&w->rng) % LIVE);
    unsigned slot = (unsigned)(pcm_test_rand(&w->rng) % SLOT_COUNT);
    struct object o;
    if (pick < 30 && w->hoarded < HOARD_MOST) /* grow: 1..16 KiB more */
        return object_new(run, index, between(&w->rng, 1024, 16384), &w->serial, &w->hoard[w->hoarded++]);
    if (pick < 70) { /* replace one of ours */
        return object_release(run, &w->live[i], "replaced") &&
               object_new(run, index, table_size(&w->rng), &w->serial, &w->live[i]);
    }
    if (pick < 95) /* trade through a slot */
        return object_new(run, index, table_size(&w->rng), &w->serial, &o) && slot_exchange(run, slot, o.p);
    return slot_exchange(run, slot, NULL);
}

/* Whether worker `index` moves with the epochs: all but the straggler,
 * when there are enough workers to spare one. */
static bool moves(const struct run *run, unsigned index)
{
    return index != STRAGGLER || run->workers < 3;
}

static void work(struct run *run, unsigned index, struct worker *w)
{
    unsigned long on = ~0ul; /* no epoch yet: pin at the first */
    for (unsigned long op = 1; !__atomic_load_n(&run->stop, __ATOMIC_RELAXED); op++) {
        unsigned long epoch = __atomic_load_n(&run->epoch, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&run->end, __ATOMIC_ACQUIRE))
            return;
        if (!moves(run, index) && (epoch % 3 != 1 || op % STRAGGLE_STEPS == 0)) {
            pcm_test_sleep_ms(STRAGGLE_MS);
            if (epoch % 3 != 1)
                continue;
        }
        if (epoch != on && moves(run, index)) {
            /* To this epoch's CPU, where last epoch's hoard goes back to
             * the heap just left (or left the epoch before). */
            on = epoch;
            int cpu = run->cpus.cpu[epoch % 2];
            if (!pcm_test_pin(cpu)) {
                PCM_CHECK(0, "cannot pin worker %u to CPU %d", index, cpu);
                failed(run);
                return;
            }
            __atomic_fetch_add(&run->hoard_freed_elsewhere, w->hoarded, __ATOMIC_RELAXED);
            if (!release_all(run, w->hoard, w->hoarded, "hoarded last epoch"))
                return;
            w->hoarded = 0;
        }
        if (!step(run, index, w))
            return;
        if (index == 0 && op % TRIM_EVERY == 0) {
            pcm_malloc_trim(0);
            __atomic_fetch_add(&run->trims, 1, __ATOMIC_RELAXED);
        }
        if (op % CHECK_EVERY == 0 && !(check_all(run, w->live, LIVE) && check_all(run, w->hoard, w->hoarded)))
            return;
    }
}

/* The two heaps' reclaims so far: counted under their locks. */
static pcm_word_t reclaims(const struct run *run)
{
    pcm_word_t sum = 0;
    for (unsigned k = 0; k < 2; k++) {
        struct pcm_heap *h = &pcm_heaps[run->cpus.heap[k]];
        pcm_heap_lock(h);
        sum += h->stats.reclaims;
        pcm_heap_unlock(h);
    }
    return sum;
}

/* Pinned nowhere and allocating nothing: it only says when to move, and
 * when to stop - after run->epochs epochs, or later if no reclaim came. */
static void conduct(struct run *run)
{
    unsigned long most = run->epochs * EPOCHS_MOST;
    for (unsigned long epoch = 1; epoch < most && !__atomic_load_n(&run->stop, __ATOMIC_RELAXED); epoch++) {
        pcm_test_sleep_ms(EPOCH_MS);
        if (epoch >= run->epochs && reclaims(run) != run->reclaims_before)
            break;
        __atomic_store_n(&run->epoch, epoch, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&run->end, 1, __ATOMIC_RELEASE);
}

static void thread(void *arg, unsigned index)
{
    struct run *run = arg;
    if (index == run->workers) {
        conduct(run);
        return;
    }
    /* On the stack, not the heap under test: a report names objects
     * from tables that nothing but the worker writes. */
    struct worker w;
    memset(&w, 0, sizeof w);
    w.rng = pcm_pattern_mix(run->seed + index) | 1;
    work(run, index, &w);
    if (__atomic_load_n(&run->stop, __ATOMIC_RELAXED))
        return; /* leave everything: memory may be corrupt */
    if (release_all(run, w.live, LIVE, "at the end"))
        release_all(run, w.hoard, w.hoarded, "at the end");
}

PCM_TEST(heaps_given_back_while_their_objects_move)
{
    struct run run;
    memset(&run, 0, sizeof run);
    if (!two_heaps_or_skip(&run.cpus))
        return;
    run.workers = pcm_test_threads();
    run.seed = pcm_test_seed() * 0x9E3779B97F4A7C15ull + 7;
    unsigned long epochs = pcm_test_scale(EPOCHS);
    run.epochs = epochs > EPOCHS_MIN ? epochs : EPOCHS_MIN;
    run.slots = pcm_test_shared_alloc(SLOT_COUNT * sizeof *run.slots);
    PCM_REQUIRE(run.slots, "cannot map %u slots", SLOT_COUNT);

    run.reclaims_before = reclaims(&run);
    uint64_t start = pcm_test_clock_ns();
    pcm_test_run_workers(run.workers + 1, thread, &run);
    for (unsigned s = 0; s < SLOT_COUNT && !run.stop; s++)
        slot_exchange(&run, s, NULL);
    uint64_t ms = (pcm_test_clock_ns() - start) / 1000000u;
    pcm_test_shared_free(run.slots, SLOT_COUNT * sizeof *run.slots);
    if (run.stop)
        return;
    pcm_word_t gave_back = reclaims(&run) - run.reclaims_before;
    pcm_test_printf("  %u workers, %lu moves between CPUs %d and %d in %llu ms: %lu objects, %lu hoarded freed on "
                    "the other CPU, %lu traded, %lu trims; the two heaps gave memory back %lu times\n",
                    run.workers, run.epoch, run.cpus.cpu[0], run.cpus.cpu[1], (unsigned long long)ms,
                    run.allocated, run.hoard_freed_elsewhere, run.traded, run.trims, (unsigned long)gave_back);
    PCM_CHECK(gave_back > 0, "no heap gave memory back: the race was not run");
}
