/*
 * hardening.c - the out-of-line half of hardening.h: the hardened build's
 * checks, and the default build's warning that it has none.
 *
 * Must never happen here: malloc or stdio (this runs inside malloc), a
 * lock (the free bits are changed by CAS from any thread), or a report of
 * a link read by a concurrent pop that may be stale: percpu_cache.h
 * confirms with a CAS that the cache did not change before it calls
 * pcm_link_corrupt.
 */
#include "hardening.h"

#include <string.h>
#include <sys/auxv.h>

#include "heap.h"
#include "init.h"
#include "message.h"
#include "misuse.h"
#include "os.h"
#include "segment_map.h"

#ifdef PCM_HARDENED

const char *pcm_hardening_summary(void)
{
    return "hardened build: encoded free-list links, a free bit per object checked on every free, freed memory "
           "filled and checked on reuse, shuffled refills, guard pages around each segment's spans";
}

/* ---- per-heap secrets and generators, the filling ---- */

/* The filling, to compare with by memcmp (the C library's is vectorised:
 * a 512-byte object is checked in tens of instructions, not hundreds).
 * Written at start-up. */
static unsigned char filled[1024];

/* A 64-bit mixer (the splitmix64 finaliser's constants): every bit of
 * the result depends on every bit of x. */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* 128 random bits drawn at start-up, from which each heap's secret and
 * generator seed are derived when the heap is first used: the heaps stay
 * untouched until then (heap.h, lazy heaps). */
static uint64_t heap_seed[2];

static pcm_word_t heap_link_key(unsigned heap)
{
    return (pcm_word_t)mix64(heap_seed[0] + 2 * (uint64_t)heap + 1);
}

/* A heap's generator; callers hold its lock.  A state of 0 is a heap's
 * first draw: seeded then (a seed that mixes to 0 just starts there). */
static uint64_t next_random(struct pcm_heap *h)
{
    if (!h->random_state)
        h->random_state = mix64(heap_seed[1] + 2 * (uint64_t)pcm_heap_index(h) + 2);
    h->random_state += 0x9e3779b97f4a7c15ull;
    return mix64(h->random_state);
}

void pcm_hardening_startup(void)
{
    const char *off = pcm_os_getenv("PCMALLOC_HARDENED");
    if ((off && off[0] == '0') || (!off && (off = pcm_os_getenv("PCMALLOC_SECURE")) && off[0] == '0'))
        pcm_message("this is the hardened library (libpcmalloc-hardened.so): its checks cannot be turned off; "
                    "preload libpcmalloc.so for the default build");
    pcm_opts.hardened = pcm_opts.secure = true;
    memset(filled, PCM_FILL_BYTE, sizeof filled);
    /* 128 random bits from the kernel (AT_RANDOM's 16 bytes if it has none
     * yet), stretched into a secret and a generator seed per heap. */
    uint64_t seed[2] = {0, 0};
    if (!pcm_os_random(seed, sizeof seed)) {
        const void *random = (const void *)getauxval(AT_RANDOM);
        if (random)
            memcpy(seed, random, sizeof seed);
        seed[0] ^= (uint64_t)(uintptr_t)&seed; /* differs per process even so */
    }
    heap_seed[0] = seed[0];
    heap_seed[1] = seed[1];
}

/* ---- the free bits (segment.h) ---- */

static inline volatile pcm_word_t *bit_word(struct pcm_segment *s, const void *p, pcm_word_t *bit)
{
    size_t unit = ((uintptr_t)p - (uintptr_t)s) / PCM_MIN_ALIGN;
    *bit = (pcm_word_t)1 << (unit % PCM_WORD_BITS);
    return &s->free_bits[unit / PCM_WORD_BITS];
}

static bool bit_is_set(struct pcm_segment *s, const void *p)
{
    pcm_word_t bit;
    return pcm_load_relaxed(bit_word(s, p, &bit)) & bit;
}

/* Set (set == true) or clear p's bit; whether it was set before.  acq_rel:
 * a free's setting is ordered before the push that publishes the object,
 * a malloc's clearing after the pop that took it. */
static bool bit_change(struct pcm_segment *s, const void *p, bool set)
{
    pcm_word_t bit;
    volatile pcm_word_t *word = bit_word(s, p, &bit);
    pcm_word_t seen = pcm_load_relaxed(word);
    while (!pcm_cas_acq_rel(word, &seen, set ? seen | bit : seen & ~bit))
        ;
    return seen & bit;
}

/* ---- links ---- */

bool pcm_link_plausible(const void *at, pcm_word_t next)
{
    if (!next)
        return true;
    if (next % PCM_MIN_ALIGN)
        return false;
    struct pcm_segment *s = pcm_segment_of((void *)next);
    const pcm_word_t *owner = pcm_segment_map_find((void *)next);
    /* A chunk of ours that is a segment of the same heap, and a free
     * object there (its bit): anything else is a forged or garbled link. */
    return owner == (const pcm_word_t *)s && *owner == PCM_KIND_SEGMENT && s->owner == pcm_segment_of(at)->owner &&
           bit_is_set(s, (void *)next);
}

void pcm_link_corrupt(const void *at, pcm_word_t next)
{
    pcm_misuse_corrupt_link(at, (const void *)next);
}

/* ---- objects ---- */

/* The first byte of [from, to) that is not the filling, or to. */
static const unsigned char *first_unfilled(const unsigned char *from, const unsigned char *to)
{
    while (from < to) {
        size_t n = (size_t)(to - from) < sizeof filled ? (size_t)(to - from) : sizeof filled;
        if (memcmp(from, filled, n) != 0)
            break;
        from += n;
    }
    while (from < to && *from == PCM_FILL_BYTE)
        from++;
    return from;
}

static void fill(void *obj, uint32_t size)
{
    if (size > PCM_FILL_FROM)
        memset((char *)obj + PCM_FILL_FROM, PCM_FILL_BYTE, size - PCM_FILL_FROM);
}

void pcm_hardened_free(const struct pcm_span *span, void *p, const char *call)
{
    if (bit_change(pcm_segment_of(p), p, true))
        pcm_misuse_double_free(call, p);
    fill(p, span->object_size);
}

void pcm_hardened_check_live(void *p, const char *call)
{
    if (bit_is_set(pcm_segment_of(p), p))
        pcm_misuse_double_free(call, p);
}

void pcm_hardened_handed_out(void *obj)
{
    struct pcm_segment *s = pcm_segment_of(obj);
    if (!bit_change(s, obj, false))
        pcm_misuse_handed_out_twice(obj);
    uint32_t size = pcm_span_of(s, obj)->object_size;
    /* Word 0 is the link, checked when it was followed; word 1 (and word 2
     * on 32-bit builds) the mark; then the filling. */
    if (!pcm_object_is_marked_free(obj))
        pcm_misuse_write_after_free(obj, sizeof(pcm_word_t));
    const unsigned char *bytes = obj;
    if (size > PCM_FILL_FROM) {
        const unsigned char *changed = first_unfilled(bytes + PCM_FILL_FROM, bytes + size);
        if (changed != bytes + size)
            pcm_misuse_write_after_free(obj, (size_t)(changed - bytes));
    }
    *(pcm_word_t *)obj = 0; /* the encoded link would tell the program its heap's secret */
}

void pcm_hardened_carved(uintptr_t first, uint32_t count, uint32_t size)
{
    struct pcm_segment *s = pcm_segment_of((void *)first);
    for (uint32_t i = 0; i < count; i++) {
        void *obj = (void *)(first + (uintptr_t)i * size);
        bit_change(s, obj, true);
        pcm_free_mark_set(obj, 0);
        fill(obj, size);
    }
}

void pcm_hardened_span_created(struct pcm_span *span)
{
    struct pcm_segment *s = pcm_segment_of((void *)span->start);
    pcm_word_t bit;
    volatile pcm_word_t *word = bit_word(s, (void *)span->start, &bit);
    /* A span is whole pages, and a page's bits whole words. */
    size_t words = ((size_t)span->pages << PCM_PAGE_SHIFT) / PCM_MIN_ALIGN / PCM_WORD_BITS;
    for (size_t i = 0; i < words; i++)
        pcm_store_relaxed(&word[i], 0);
}

bool pcm_hardened_segment_created(struct pcm_segment *s)
{
    s->link_key = heap_link_key(s->owner);
    /* A guard is a kernel page at least (mprotect's unit), 16 or 64 KiB
     * on some arm64 kernels. */
    size_t guard = pcm_os_page_size() > PCM_PAGE_SIZE ? pcm_os_page_size() : PCM_PAGE_SIZE;
    size_t header = PCM_ALIGN_UP((size_t)s->header_pages << PCM_PAGE_SHIFT, guard);
    if (!pcm_os_guard((char *)s + header, guard) ||
        !pcm_os_guard((char *)s + PCM_SEGMENT_SIZE - guard, guard))
        return false;
    size_t guard_pages = guard >> PCM_PAGE_SHIFT;
    size_t body = (header >> PCM_PAGE_SHIFT) + guard_pages; /* the first page a span may use */
    pcm_segment_reserve_pages(s, s->header_pages, body - s->header_pages);
    pcm_segment_reserve_pages(s, PCM_SEGMENT_PAGES - guard_pages, guard_pages);
    s->header_pages = (uint32_t)body;
    s->free_pages = (uint32_t)(PCM_SEGMENT_PAGES - body - guard_pages);
    return true;
}

void pcm_hardened_shuffle(unsigned heap, void **first, void **last, unsigned count)
{
    void *objects[128];
    if (count < 2 || count > sizeof objects / sizeof objects[0])
        return;
    void *obj = *first;
    for (unsigned i = 0; i < count; i++) {
        objects[i] = obj;
        obj = pcm_link_next(obj, *(pcm_word_t *)obj);
    }
    /* Fisher-Yates: each order equally likely (up to the modulo's bias). */
    struct pcm_heap *h = &pcm_heaps[heap];
    for (unsigned i = count - 1; i > 0; i--) {
        unsigned j = (unsigned)(next_random(h) % (i + 1));
        void *swap = objects[i];
        objects[i] = objects[j];
        objects[j] = swap;
    }
    for (unsigned i = 0; i + 1 < count; i++)
        *(pcm_word_t *)objects[i] = pcm_link_encode(objects[i], (pcm_word_t)objects[i + 1]);
    *(pcm_word_t *)objects[count - 1] = pcm_link_encode(objects[count - 1], 0);
    *first = objects[0];
    *last = objects[count - 1];
}

#else

const char *pcm_hardening_summary(void)
{
    return "default build: the cheap misuse checks (libpcmalloc-hardened.so has the hardened ones)";
}

/* PCMALLOC_HARDENED=1 or PCMALLOC_SECURE=1 given to this library must not
 * silently do nothing. */
void pcm_hardening_startup(void)
{
    if (pcm_opts.hardened || pcm_opts.secure)
        pcm_message("%s=1: this library (libpcmalloc.so) has no hardened mode; preload libpcmalloc-hardened.so "
                    "for it (pcmalloc --secure does). Running with the default checks only",
                    pcm_opts.hardened ? "PCMALLOC_HARDENED" : "PCMALLOC_SECURE");
}

#endif
