/*
 * large_cache.c - the cache of freed large mappings (large_cache.h).
 * Lock-free: each slot is one word, filled and emptied by CAS.  No
 * malloc, no locks; never reads a header it does not own.
 */
#include "large_cache.h"

#include <stdint.h>

#include "init.h"
#include "large.h"
#include "layout.h"

/* How often a taker retries when the best-fitting slot was taken under it
 * before giving up and mapping afresh. */
#define TAKE_TRIES 4u
/* PCMALLOC_LARGE_CACHE is in MiB, at most this (it fits a 32-bit size_t). */
#define LIMIT_MIB_MAX 4095u

/*
 * A slot holds 0 or the word header | pages: a cached mapping's header
 * (granule-aligned, so its low PCM_MAP_SHIFT bits are zero) and its size
 * in pages (below 2^PCM_MAP_SHIFT: a mapping of more pages is not cached,
 * which on 64-bit no bound allows anyway, and on 32-bit means one of 256
 * MiB or more).  The word says all a taker
 * needs, so no one reads the header of a mapping that another thread may
 * take and unmap meanwhile - that read could fault.
 *
 * Invariants:
 *   - a mapping is in at most one slot, and while it is in one its header
 *     is not written (its map_bytes equals the slot's pages);
 *   - sum over slots of their bytes <= cache_bytes <= limit, except that
 *     cache_bytes may exceed limit by a put that is about to back off:
 *     a put reserves its bytes in cache_bytes before it fills a slot (and
 *     gives them back if there is no room), a take or decay empties the
 *     slot before it subtracts.  So the cache never holds more than limit.
 *   - slot_epoch[i] is the decay epoch at which the mapping now in slot i
 *     was put, or a later one (stored before the filling CAS).
 *
 * ABA: a CAS from word W succeeds only if W - this mapping, this size - is
 * in the slot now.  If it left and came back in between (the same header
 * at the same size), taking it is just as right as taking it the first
 * time: nothing a taker decided depends on anything but W.  For decay,
 * such a return may come with a fresh epoch that the ticker read too
 * early; then a mapping that was just put back is unmapped a period too
 * soon - a lost reuse, never a wrong result.
 */
static volatile pcm_word_t cache_slot[PCM_LARGE_CACHE_SLOTS];
static volatile pcm_word_t slot_epoch[PCM_LARGE_CACHE_SLOTS];
static volatile pcm_word_t cache_bytes;
/* Decay ticks so far (wraps; compared by unsigned difference). */
static volatile pcm_word_t decay_epoch;

#define PAGES_MASK (((pcm_word_t)1 << PCM_MAP_SHIFT) - 1)
_Static_assert(UINTPTR_MAX == 0xffffffffu || (((size_t)LIMIT_MIB_MAX << 20) / 4 >> PCM_PAGE_SHIFT) <= PAGES_MASK,
               "64-bit: a cached mapping's pages fit below a granule-aligned header");

static size_t word_bytes(pcm_word_t word)
{
    return (size_t)(word & PAGES_MASK) << PCM_PAGE_SHIFT;
}

static struct pcm_large *word_header(pcm_word_t word)
{
    return (struct pcm_large *)(uintptr_t)(word & ~PAGES_MASK);
}

size_t pcm_large_cache_limit(void)
{
    unsigned mib = pcm_opts.large_cache_mib;
    return (size_t)(mib < LIMIT_MIB_MAX ? mib : LIMIT_MIB_MAX) << 20;
}

/* Best fit: the smallest cached mapping that holds map_bytes.  Any size
 * up to most_bytes is taken: its pages are already resident, and reusing
 * them saves the faults of fresh ones - a buffer that grows by realloc to
 * the same size each round reuses last round's mapping and never has to
 * grow it.  With or_smaller, if none holds map_bytes, the largest one that
 * does not: the caller grows it, and faults in only the difference. */
struct pick {
    unsigned slot; /* PCM_LARGE_CACHE_SLOTS: none */
    pcm_word_t word;
    size_t bytes;
};

static struct pcm_large *take(size_t map_bytes, size_t most_bytes, bool or_smaller)
{
    if (!pcm_load_relaxed(&cache_bytes))
        return NULL; /* the common case of an empty cache: one load */
    for (unsigned tries = 0; tries < TAKE_TRIES; tries++) {
        struct pick fit = {PCM_LARGE_CACHE_SLOTS, 0, SIZE_MAX}, below = {PCM_LARGE_CACHE_SLOTS, 0, 0};
        for (unsigned i = 0; i < PCM_LARGE_CACHE_SLOTS; i++) {
            pcm_word_t word = pcm_load_relaxed(&cache_slot[i]);
            size_t have = word_bytes(word);
            if (!word)
                continue;
            if (have >= map_bytes && have <= most_bytes && have < fit.bytes)
                fit = (struct pick){i, word, have};
            else if (have < map_bytes && have > below.bytes)
                below = (struct pick){i, word, have};
        }
        if (fit.slot == PCM_LARGE_CACHE_SLOTS && or_smaller)
            fit = below;
        if (fit.slot == PCM_LARGE_CACHE_SLOTS)
            return NULL;
        /* acquire: the putter's writes to the header happen before ours */
        if (pcm_cas_acq_rel(&cache_slot[fit.slot], &fit.word, 0)) {
            pcm_fetch_sub_acq_rel(&cache_bytes, fit.bytes);
            return word_header(fit.word);
        }
    }
    return NULL;
}

struct pcm_large *pcm_large_cache_take(size_t map_bytes, size_t most_bytes)
{
    return take(map_bytes, most_bytes, false);
}

struct pcm_large *pcm_large_cache_take_nearest(size_t map_bytes)
{
    return take(map_bytes, SIZE_MAX, true);
}

bool pcm_large_cache_put(struct pcm_large *large)
{
    size_t bytes = large->map_bytes;
    size_t limit = pcm_large_cache_limit();
    if (bytes > limit / 4)
        return false; /* one buffer must not push out all others */
    if ((bytes >> PCM_PAGE_SHIFT) > PAGES_MASK)
        return false; /* (32-bit) its pages do not fit the slot's word */
    /* Reserve first: the slots then never hold more than the limit. */
    if (pcm_fetch_add_acq_rel(&cache_bytes, bytes) + bytes > limit) {
        pcm_fetch_sub_acq_rel(&cache_bytes, bytes);
        return false;
    }
    pcm_word_t word = (pcm_word_t)(uintptr_t)large | (pcm_word_t)(bytes >> PCM_PAGE_SHIFT);
    pcm_word_t epoch = pcm_load_relaxed(&decay_epoch);
    for (unsigned i = 0; i < PCM_LARGE_CACHE_SLOTS; i++) {
        if (pcm_load_relaxed(&cache_slot[i]))
            continue;
        /* Before the CAS that publishes the mapping: a ticker that sees
         * the mapping sees this epoch or a later one. */
        pcm_store_relaxed(&slot_epoch[i], epoch);
        pcm_word_t expected = 0;
        /* release: the header's state is visible to the taker */
        if (pcm_cas_acq_rel(&cache_slot[i], &expected, word))
            return true;
    }
    pcm_fetch_sub_acq_rel(&cache_bytes, bytes);
    return false;
}

/* Take slot i's mapping `word` out and unmap it; its bytes, or 0 if the
 * slot changed meanwhile. */
static size_t release_slot(unsigned i, pcm_word_t word)
{
    if (!pcm_cas_acq_rel(&cache_slot[i], &word, 0))
        return 0;
    size_t bytes = word_bytes(word);
    pcm_fetch_sub_acq_rel(&cache_bytes, bytes);
    pcm_large_unmap(word_header(word));
    return bytes;
}

bool pcm_large_cache_trim(void)
{
    bool any = false;
    for (unsigned i = 0; i < PCM_LARGE_CACHE_SLOTS; i++) {
        pcm_word_t word = pcm_swap_acq_rel(&cache_slot[i], 0);
        if (word) {
            pcm_fetch_sub_acq_rel(&cache_bytes, word_bytes(word));
            pcm_large_unmap(word_header(word));
            any = true;
        }
    }
    return any;
}

size_t pcm_large_cache_decay(bool all)
{
    pcm_word_t now = pcm_fetch_add_acq_rel(&decay_epoch, 1) + 1;
    size_t released = 0;
    for (unsigned i = 0; i < PCM_LARGE_CACHE_SLOTS; i++) {
        /* acquire: pairs with the put's CAS, so the epoch read next is the
         * put's or later */
        pcm_word_t word = pcm_load_acquire(&cache_slot[i]);
        if (!word)
            continue;
        /* Put before the previous tick: unused for a whole period (all:
         * put before this one, in a quiet period - decay.c). */
        if (now - pcm_load_relaxed(&slot_epoch[i]) >= (all ? 1u : 2u))
            released += release_slot(i, word);
    }
    return released;
}

size_t pcm_large_cache_bytes(void)
{
    return pcm_load_relaxed(&cache_bytes);
}

unsigned pcm_large_cache_count(void)
{
    unsigned count = 0;
    for (unsigned i = 0; i < PCM_LARGE_CACHE_SLOTS; i++)
        count += pcm_load_relaxed(&cache_slot[i]) != 0;
    return count;
}
