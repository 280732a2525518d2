/*
 * api.c - the pcm_* API: malloc and friends with glibc's semantics.
 *
 * The fast paths are here: malloc is a size-class lookup and one pop from
 * the current CPU's cache; free is the segment-map lookup, the checks
 * that catch invalid and double frees, and one push (or a remote push).
 * Never calls malloc; free never changes errno.
 */
#include "pcmalloc.h"

#include <errno.h>
#include <malloc.h>
#include <string.h>

#include "cxx_mangling.h"
#include "fast_path.h"
#include "free_mark.h"
#include "hardening.h"
#include "heap.h"
#include "init.h"
#include "large.h"
#include "large_cache.h"
#include "malloc_fast.h"
#include "misuse.h"
#include "os.h"
#include "percpu_cache.h"
#include "percpu_rseq.h"
#include "remote.h"
#include "segment_map.h"
#include "stats.h"

static inline bool is_power_of_two(size_t x)
{
    return x && !(x & (x - 1));
}

void *pcm_malloc(size_t size)
{
    return pcm_malloc_inline(size);
}

/* ---- finding what a pointer is ---- */

struct object_info {
    struct pcm_span *span;   /* small object: its span, else NULL */
    struct pcm_large *large; /* large object: its header, else NULL */
};

/* p lies in span's pages: is it the start of an object handed out?  The
 * cheap check of every free, without a verdict: the fast path leaves the
 * diagnosis to checked_span. */
static inline __attribute__((always_inline)) bool span_has_object(const struct pcm_span *span, void *p)
{
    return __builtin_expect(pcm_span_holds_object(span, p), 1);
}

/* p lies in segment: its span, after the cheap checks that p is at the
 * start of an object handed out and not already free; else abort with a
 * message naming `call`. */
static struct pcm_span *checked_span(void *segment, void *p, const char *call)
{
    struct pcm_span *span = pcm_span_of((struct pcm_segment *)segment, p);
    if (!span_has_object(span, p))
        pcm_misuse_invalid_pointer(call, p);
    if (pcm_object_is_marked_free(p))
        pcm_misuse_double_free(call, p);
    return span;
}

/* p is not in a segment: a live large object's header, or abort. */
static struct pcm_large *checked_large(pcm_word_t *owner, void *p, const char *call)
{
    if (!owner)
        pcm_misuse_invalid_pointer(call, p);
    struct pcm_large *large = (struct pcm_large *)owner;
    pcm_large_check(large, p, call);
    return large;
}

/* Validate p (non-NULL) as a live object of pcmalloc's, or abort with a
 * message naming `call`: it must lie in a chunk pcmalloc owns and be a
 * live object there. */
static struct object_info lookup(void *p, const char *call)
{
    struct object_info info = {NULL, NULL};
    void *segment = pcm_segment_index_has(p) ? pcm_segment_of(p) : NULL;
    if (!segment) {
        pcm_word_t *owner = pcm_segment_map_find(p);
        if (!owner || *owner != PCM_KIND_SEGMENT) {
            info.large = checked_large(owner, p, call);
            return info;
        }
        segment = owner;
    }
    info.span = checked_span(segment, p, call);
    pcm_hardened_check_live(p, call);
    return info;
}

static CAS_PATH void small_free_cas(struct pcm_span *span, unsigned cls, void *p)
{
    /* The index, not the heap: the current CPU's heap may never have been
     * made ready, and only the owner's (ready) heap is read. */
    unsigned current = pcm_heap_current_index();
    if (__builtin_expect(span->owner == current, 1)) {
        struct pcm_heap *h = &pcm_heaps[current];
        if (__builtin_expect(!pcm_cache_push(&h->bins[cls].cache, p, pcm_bin_limit(&h->bins[cls])), 0))
            pcm_heap_free_slow(h, cls, p);
    } else {
        pcm_remote_free(&pcm_heaps[span->owner], cls, p);
    }
}

#ifdef PCM_ARCH_RSEQ
/* The rseq path's push of p, of span. */
static inline __attribute__((always_inline)) void small_free_rseq(struct pcm_span *span, void *p)
{
    pcm_word_t mark = pcm_free_mark(p);
    if (PCM_FREE_MARK_WIDE)
        ((pcm_word_t *)p)[2] = pcm_free_mark_wide(p);
    pcm_arch_rseq_push(span->slot0, pcm_cpu_rseq_offset, span->owner, p, mark, other_cpu, full, aborted);
    return;
    /* Out of line, with nothing but p: the fast path keeps no other
     * value alive across the section, so it saves no registers. */
other_cpu: /* or a thread without a CPU number */
    pcm_heap_free_rseq_slow(p, PCM_RSEQ_FREE_OTHER_CPU);
    return;
full:
    pcm_heap_free_rseq_slow(p, PCM_RSEQ_FREE_FULL);
    return;
aborted:
    pcm_heap_free_rseq_slow(p, PCM_RSEQ_FREE_ABORTED);
}
#endif

static inline __attribute__((always_inline)) void small_free(struct pcm_span *span, void *p, const char *call)
{
    pcm_hardened_free(span, p, call);
#ifdef PCM_ARCH_RSEQ
    /* A span exists only after start-up, so the path is chosen by now. */
    if (__builtin_expect(pcm_fast_path_is_rseq_after_start(), 1)) {
        small_free_rseq(span, p);
        return;
    }
#endif
    small_free_cas(span, span->class_plus1 - 1u, p);
}

static __attribute__((noinline)) void large_free(struct pcm_large *large, void *p, const char *call)
{
    int saved = errno; /* munmap may set it; free must not */
    pcm_large_free(large, p, call);
    errno = saved;
}

/* Free an object lookup() has already validated. */
static void free_found(struct object_info info, void *p, const char *call)
{
    if (info.span)
        small_free(info.span, p, call);
    else
        large_free(info.large, p, call);
}

/* The free path: the segment index, the checks, one push.  Anything
 * else - a large object, a segment the index missed, a pointer that fails
 * a check - goes through lookup(), which finds what p is or aborts naming
 * the misuse: out of line and reached by a tail call, so the small path
 * around it needs no stack frame. */
static __attribute__((noinline)) void free_checked_slow(void *p, const char *call)
{
    if (p) /* NULL lies in chunk 0, never a segment: it comes this way */
        free_found(lookup(p, call), p, call);
}

/* p is in a segment: its span, if the cheap checks pass. */
static inline __attribute__((always_inline)) struct pcm_span *fast_checked_span(void *p)
{
    struct pcm_span *span = pcm_span_of(pcm_segment_of(p), p);
    return __builtin_expect(span_has_object(span, p) && !pcm_object_is_marked_free(p), 1) ? span : NULL;
}

static inline __attribute__((always_inline)) void free_checked(void *p, const char *call)
{
    struct pcm_span *span;
#ifdef PCM_ARCH_RSEQ
    /* The index's byte says the path as well (segment_map.h).  Compared
     * in memory: the CAS path below reads it again (the barrier keeps the
     * compiler from loading it into a register for both), which spares
     * the rseq path an instruction. */
    if (__builtin_expect(pcm_segment_index_kind(p) == PCM_INDEX_RSEQ, 1)) {
        if (__builtin_expect((span = fast_checked_span(p)) != NULL, 1)) {
            small_free_rseq(span, p);
            return;
        }
        free_checked_slow(p, call);
        return;
    }
    __asm__ __volatile__("" ::: "memory");
#endif
    if (__builtin_expect(pcm_segment_index_kind(p) != PCM_INDEX_NONE, 1) && (span = fast_checked_span(p)) != NULL) {
        small_free(span, p, call);
        return;
    }
    free_checked_slow(p, call);
}

/* free(NULL) needs no test of its own: see free_checked_slow. */
void pcm_free(void *p)
{
    free_checked(p, "free");
}

static size_t usable_size(struct object_info info)
{
    return info.span ? info.span->object_size : pcm_large_usable(info.large);
}

size_t pcm_malloc_usable_size(void *p)
{
    return p ? usable_size(lookup(p, "malloc_usable_size")) : 0;
}

void *pcm_calloc(size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    if (bytes > PCM_SMALL_MAX) {
        return pcm_large_alloc(bytes, 0, true); /* fresh mappings are already zero */
    }
    void *p = pcm_malloc(bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

/* ---- aligned allocation ---- */

/* The class serving `size` bytes at `alignment` (<= a page): spans start on
 * a page and hold objects at multiples of the class size, so a class whose
 * size is a multiple of the alignment gives aligned objects.  Every power
 * of two from 16 to 256 KiB is a class, so the search ends within eight. */
static unsigned aligned_class(size_t alignment, size_t size)
{
    unsigned cls = pcm_size_class(size < alignment ? alignment : size);
    while (pcm_class_size(cls) % alignment)
        cls++;
    return cls;
}

static void *aligned_alloc_checked(size_t alignment, size_t size)
{
    if (alignment <= PCM_MIN_ALIGN)
        return pcm_malloc(size);
    if (alignment <= PCM_PAGE_SIZE && size <= PCM_SMALL_MAX)
        return small_alloc(aligned_class(alignment, size));
    return pcm_large_alloc(size, alignment, false);
}

static size_t next_power_of_two(size_t x)
{
    size_t p = 1;
    while (p < x && p)
        p <<= 1;
    return p;
}

void *pcm_memalign(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        alignment = next_power_of_two(alignment);
        if (!alignment) {
            errno = EINVAL;
            return NULL;
        }
    }
    return aligned_alloc_checked(alignment, size);
}

int pcm_posix_memalign(void **out, size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment) || alignment % sizeof(void *))
        return EINVAL;
    int saved = errno;
    void *p = aligned_alloc_checked(alignment, size);
    errno = saved; /* posix_memalign reports through its result, not errno */
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *pcm_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return aligned_alloc_checked(alignment, size);
}

/* valloc and pvalloc mean the kernel's page (16 or 64 KiB on some arm64
 * kernels), not the 4 KiB unit spans are counted in. */
void *pcm_valloc(size_t size)
{
    return aligned_alloc_checked(pcm_os_page_size(), size);
}

void *pcm_pvalloc(size_t size)
{
    size_t page = pcm_os_page_size();
    if (size > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    size_t rounded = size ? PCM_ALIGN_UP(size, page) : page;
    return aligned_alloc_checked(page, rounded);
}

/* ---- realloc ---- */

/* A buffer that realloc grows past this moves to a large mapping at once:
 * from there on it grows with mremap, without copying.  Not on 32-bit
 * builds: each large mapping starts on its own 4 MiB boundary, and 3 GiB
 * of address space would run out after a few hundred such buffers. */
#if UINTPTR_MAX == 0xffffffffu
#define REALLOC_LARGE_FROM (PCM_SMALL_MAX + 1)
#else
#define REALLOC_LARGE_FROM ((size_t)64 * 1024)
#endif

/* Growth of a small object of this usable size or more rounds up to
 * twice the size (pcm_realloc). */
#define REALLOC_DOUBLE_FROM ((size_t)PCM_CLASS_TABLE_MAX)

/* A buffer of a page or more that realloc grows takes a cached large
 * mapping of at most this size when the cache has one: its pages are
 * resident already and the buffer grows on in place from there, without
 * the copies through the small classes (glibc's heap top does the same
 * for a buffer grown again after one of its kind was freed).  Bounded so
 * that a short string does not hold a big buffer's pages. */
#define REALLOC_ADOPT_MOST ((size_t)2 << 20)

/* realloc by moving: a new object of `capacity` bytes (>= size) gets the
 * contents, then p is freed. */
static void *move_object(struct object_info info, void *p, size_t old_usable, size_t size, size_t capacity)
{
    void *fresh = NULL;
    bool growing = size > old_usable;
    if (growing && capacity >= REALLOC_LARGE_FROM) {
        fresh = pcm_large_alloc(capacity, 0, false);
    } else {
        if (growing && old_usable >= PCM_PAGE_SIZE)
            fresh = pcm_large_alloc_cached(capacity, REALLOC_ADOPT_MOST);
        if (!fresh)
            fresh = pcm_malloc(capacity);
    }
    if (!fresh)
        return NULL; /* p stays valid, errno is ENOMEM */
    memcpy(fresh, p, old_usable < size ? old_usable : size);
    free_found(info, p, "realloc");
    return fresh;
}

void *pcm_realloc(void *p, size_t size)
{
    if (!p)
        return pcm_malloc(size);
    if (size == 0) {
        free_checked(p, "realloc");
        return NULL;
    }
    struct object_info info = lookup(p, "realloc");
    if (info.span) {
        size_t usable = info.span->object_size;
        /* A size that fits stays in place, unless it would leave more than
         * half the object idle and a smaller class holds it: then it moves
         * there.  (Moving whenever a smaller class held it undid the
         * doubling below: 40 appends of 50 bytes from 1100 moved 23 times.)
         * From 1 KiB on, growth moves it to at least twice its size: a
         * buffer grown a little at a time is then copied O(log n) times
         * with the copies summing to 2n, not once per size class (nine
         * per doubling from 1 KiB).  Below, classes are 16 bytes apart and
         * a copy is short, so growth moves it to the class of the new
         * size: rounded up to twice, the tree's strings were left a quarter
         * empty (peak RSS 44.5 MB against 40.4 and mimalloc's 40.5). */
        if (size <= usable) {
            if (size > usable / 2 || pcm_size_class(size) == info.span->class_plus1 - 1u)
                return p;
            return move_object(info, p, usable, size, size);
        }
        if (usable >= REALLOC_DOUBLE_FROM && size < 2 * usable)
            return move_object(info, p, usable, size, 2 * usable);
        return move_object(info, p, usable, size, size);
    }
    /* A large object shrunk to half of what was last asked for, and into
     * the small range, moves to a small one; growth stays in place. */
    if (size <= PCM_SMALL_MAX && size < info.large->requested / 2)
        return move_object(info, p, pcm_large_usable(info.large), size, size);
    return pcm_large_realloc(info.large, p, size);
}

void *pcm_reallocarray(void *p, size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return pcm_realloc(p, bytes);
}

/* ---- C23 sized frees ---- */

/* expected_class for a size and alignment that allocation serves with a
 * large object: no small object can have been allocated so. */
#define NO_SMALL_CLASS PCM_CLASS_COUNT

/* The size a sized free names must fit the object and, for a small one,
 * be of its class or of one at most four times smaller: realloc's growth
 * headroom (pcm_realloc) gives an object up to 2.25 times the class of the
 * size asked for.  A large object kept in place by a shrinking realloc may
 * have any size up to its usable one. */
static void check_size(const char *call, void *p, struct object_info info, unsigned expected_class, size_t size)
{
    size_t expected = expected_class < NO_SMALL_CLASS ? pcm_class_size(expected_class) : 0;
    bool ok = info.span ? expected && info.span->object_size >= expected && info.span->object_size < 4 * expected
                        : size <= pcm_large_usable(info.large);
    if (!ok)
        pcm_misuse_wrong_size(call, p, size, usable_size(info));
}

void pcm_free_sized(void *p, size_t size)
{
    if (!p)
        return;
    struct object_info info = lookup(p, "free_sized");
    check_size("free_sized", p, info, size <= PCM_SMALL_MAX ? pcm_size_class(size) : NO_SMALL_CLASS, size);
    free_found(info, p, "free_sized");
}

void pcm_free_aligned_sized(void *p, size_t alignment, size_t size)
{
    if (!p)
        return;
    struct object_info info = lookup(p, "free_aligned_sized");
    if (!is_power_of_two(alignment) || (uintptr_t)p % alignment)
        pcm_misuse_wrong_alignment("free_aligned_sized", p, alignment);
    /* The class aligned_alloc_checked would have used; none where it went
     * to the large path. */
    unsigned cls = NO_SMALL_CLASS;
    if (size <= PCM_SMALL_MAX && alignment <= PCM_PAGE_SIZE)
        cls = alignment <= PCM_MIN_ALIGN ? pcm_size_class(size) : aligned_class(alignment, size);
    check_size("free_aligned_sized", p, info, cls, size);
    free_found(info, p, "free_aligned_sized");
}

/* ---- information and control ---- */

/* Everything free goes back to the OS: the per-CPU caches to their spans,
 * empty spans to their segments, free pages decommitted, cached large
 * mappings unmapped.  glibc's pad (memory to keep) is not needed: nothing
 * is kept but the objects in use. */
int pcm_malloc_trim(size_t pad)
{
    (void)pad;
    pcm_ensure_init();
    if (pcm_fast_path_is_rseq())
        pcm_heap_flush_caches_rseq();
    else
        pcm_heap_flush_caches_cas();
    size_t released = 0;
    for (unsigned i = 0; i < pcm_heap_count; i++) {
        if (!pcm_heap_is_ready(i))
            continue; /* never used: nothing to give back, no page to touch */
        struct pcm_heap *h = &pcm_heaps[i];
        pcm_heap_lock(h);
        released += pcm_heap_trim_locked(h);
        pcm_heap_unlock(h);
    }
    return (pcm_large_cache_trim() || released) ? 1 : 0;
}

void pcm_malloc_stats(void)
{
    pcm_ensure_init();
    pcm_stats_print();
}

struct mallinfo2 pcm_mallinfo2(void)
{
    pcm_ensure_init();
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    size_t small_in_use = 0;
    for (unsigned h = 0; h < pcm_heap_count; h++)
        for (unsigned c = 0; pcm_heap_is_ready(h) && c < PCM_CLASS_COUNT; c++)
            small_in_use += (pcm_heaps[h].stats.served[c] - pcm_heaps[h].stats.returned[c]) * pcm_class_size(c);
    struct mallinfo2 info;
    memset(&info, 0, sizeof info);
    info.arena = t.mapped_bytes - t.large_bytes;     /* segments */
    info.hblks = t.large_objects;
    info.hblkhd = t.large_bytes;                     /* large mappings */
    info.uordblks = small_in_use + t.large_bytes;    /* handed out (caches included) */
    info.fordblks = t.mapped_bytes > info.uordblks ? t.mapped_bytes - info.uordblks : 0;
    info.usmblks = t.peak_mapped_bytes;
    return info;
}

struct mallinfo pcm_mallinfo(void)
{
    struct mallinfo2 wide = pcm_mallinfo2();
    struct mallinfo narrow;
    memset(&narrow, 0, sizeof narrow);
    narrow.arena = (int)wide.arena; /* glibc's old struct: int fields wrap */
    narrow.hblks = (int)wide.hblks;
    narrow.hblkhd = (int)wide.hblkhd;
    narrow.uordblks = (int)wide.uordblks;
    narrow.fordblks = (int)wide.fordblks;
    narrow.usmblks = (int)wide.usmblks;
    return narrow;
}

int pcm_mallopt(int param, int value)
{
    (void)param;
    (void)value;
    return 1;
}

#ifdef PCM_STANDARD_NAMES
/* The library's malloc and free (preload.c has the other standard names):
 * aliases, not tail calls, so that a program's call lands on the fast path
 * itself rather than on a jump to it (threadtest +7 %, the tree and the
 * list 4 % faster).  Only in the library's build of this file
 * (Makefile): the tests link the allocator and keep libc's malloc. */
__attribute__((visibility("default"))) void *malloc(size_t size) __attribute__((alias("pcm_malloc")));
__attribute__((visibility("default"))) void free(void *p) __attribute__((alias("pcm_free")));
/* The same under glibc's second names (preload.c: ALSO_NAMED). */
__attribute__((visibility("default"))) void *__libc_malloc(size_t size) __attribute__((alias("pcm_malloc")));
__attribute__((visibility("default"))) void __libc_free(void *p) __attribute__((alias("pcm_free")));
__attribute__((visibility("default"))) void cfree(void *p) __attribute__((alias("pcm_free")));
/* Whoever links malloc from libpcmalloc.a gets preload.c's names too. */
extern const char pcm_preload_linked __attribute__((visibility("hidden")));
__attribute__((used)) static const char *const link_preload = &pcm_preload_linked;

/* C++'s operator delete in every form - plain and array, sized, nothrow,
 * over-aligned - is free too, by the same alias (operator new is in
 * preload_cxx.c).  Their size and alignment arguments go unread, as
 * libstdc++'s own operators leave them: free's checks find the object. */
#define DELETE_IS_FREE(id, name) \
    __attribute__((visibility("default"))) void id(void *p) __asm__(name) __attribute__((alias("pcm_free")));
DELETE_IS_FREE(cxx_delete, "_ZdlPv")
DELETE_IS_FREE(cxx_delete_array, "_ZdaPv")
DELETE_IS_FREE(cxx_delete_sized, "_ZdlPv" PCM_CXX_SIZE_T)
DELETE_IS_FREE(cxx_delete_array_sized, "_ZdaPv" PCM_CXX_SIZE_T)
DELETE_IS_FREE(cxx_delete_nothrow, "_ZdlPv" PCM_CXX_NOTHROW)
DELETE_IS_FREE(cxx_delete_array_nothrow, "_ZdaPv" PCM_CXX_NOTHROW)
DELETE_IS_FREE(cxx_delete_aligned, "_ZdlPv" PCM_CXX_ALIGN)
DELETE_IS_FREE(cxx_delete_array_aligned, "_ZdaPv" PCM_CXX_ALIGN)
DELETE_IS_FREE(cxx_delete_sized_aligned, "_ZdlPv" PCM_CXX_SIZE_T PCM_CXX_ALIGN)
DELETE_IS_FREE(cxx_delete_array_sized_aligned, "_ZdaPv" PCM_CXX_SIZE_T PCM_CXX_ALIGN)
DELETE_IS_FREE(cxx_delete_aligned_nothrow, "_ZdlPv" PCM_CXX_ALIGN PCM_CXX_NOTHROW)
DELETE_IS_FREE(cxx_delete_array_aligned_nothrow, "_ZdaPv" PCM_CXX_ALIGN PCM_CXX_NOTHROW)
#endif
