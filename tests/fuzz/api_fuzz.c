/*
 * tests/fuzz/api_fuzz.c - libFuzzer harness for the pcm_* API, with a
 * shadow model checked after every step.
 *
 * An input is a program: each operation is an opcode byte, a slot byte
 * and the bytes its arguments need (decode_* below; a short input simply
 * ends the program).  Operations: malloc, calloc, realloc, reallocarray,
 * memalign, posix_memalign, aligned_alloc, free, free_sized,
 * malloc_usable_size, realloc(p, 0), and rewriting an object's contents.
 * Up to SLOTS objects are live at once; each slot's shadow knows the
 * pointer, the size asked for, the alignment promised and the seed of the
 * contents written.  Sizes and alignments come from small ranges, from the
 * edges pcmalloc cares about (class limits, PCM_SMALL_MAX, page and
 * segment sizes) and from the impossible (beyond PTRDIFF_MAX, overflowing
 * products, alignments that are not powers of two).
 *
 * After every operation:
 *   - a call the model says must fail did, and a call it says must
 *     succeed (sizes up to MUST_SUCCEED_MAX) did; a failure's errno
 *     (posix_memalign: its result) is glibc's: ENOMEM for sizes no machine
 *     has, EINVAL for bad alignments;
 *   - a new object is aligned as promised (16 at least), its usable size
 *     is at least what was asked for and all of it is writable, and it
 *     overlaps no other live object;
 *   - realloc kept the old contents up to the smaller size (and on
 *     failure kept the old object whole); calloc's object reads as zeros;
 *   - free and free_sized leave errno alone;
 *   - the contents of the object touched, and the first and last bytes of
 *     every live object, are what was written.
 * At the end of each input every live object is checked whole and freed,
 * and malloc_trim(0) runs, so inputs do not leak into each other.
 *
 * A failed check prints the operation index, the call and the values,
 * then aborts: libFuzzer saves the input (crash-<sha1>), which becomes a
 * file in tests/fuzz/regressions/ and is replayed by every test run.
 * PCM_FUZZ_TRACE=1 prints every operation as it runs.
 *
 * Linked with the allocator's objects but not src/preload.c, like the
 * tests: this calls the pcm_* names, and libFuzzer and the sanitizers
 * keep the C library's malloc.
 */
#include "pcmalloc.h"

#include "layout.h"
#include "sizeclass.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 32u
#define MAX_OPS 512u
/* Every request up to this size, at an alignment up to MUST_SUCCEED_ALIGN,
 * must succeed (the fuzzing machine has the memory). */
#define MUST_SUCCEED_MAX ((size_t)16 << 20)
#define MUST_SUCCEED_ALIGN ((size_t)32 << 20)
/* Sizes and alignments from here on no machine can give. */
#if SIZE_MAX > 0xffffffffu
#define IMPOSSIBLE_MIN ((size_t)1 << 56)
#else
#define IMPOSSIBLE_MIN ((size_t)PTRDIFF_MAX - PCM_SEGMENT_SIZE)
#endif
/* Contents: every byte up to DENSE_BYTES, then edges and one byte per
 * stride, so a 16 MiB object costs a few KiB to write and check. */
#define DENSE_BYTES ((size_t)4096)
#define EDGE_BYTES ((size_t)256)
#define STRIDE ((size_t)4096)

struct slot {
    unsigned char *p;
    size_t size;      /* as asked for */
    size_t alignment; /* promised: a power of two, 16 at least */
    uint32_t seed;    /* of the contents */
};

struct input {
    const uint8_t *data;
    size_t len, at;
};

static struct slot slots[SLOTS];
static unsigned op_index;
static bool trace;

/* ---- decoding ---- */

static uint8_t next_byte(struct input *in)
{
    return in->at < in->len ? in->data[in->at++] : 0;
}

static uint32_t next_u32(struct input *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | next_byte(in);
    return v;
}

/* Sizes around the limits that matter to pcmalloc. */
static const size_t edge_sizes[] = {
    0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1024, 4095, 4096, 4097, 65536,
    PCM_SMALL_MAX - 1, PCM_SMALL_MAX, PCM_SMALL_MAX + 1, (size_t)1 << 20, PCM_SEGMENT_SIZE - 4096,
    PCM_SEGMENT_SIZE, PCM_SEGMENT_SIZE + 1, (size_t)12 << 20,
};

/* Sizes no machine can give: each must fail with ENOMEM. */
static const size_t impossible_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX / 2, (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX + 1,
    (size_t)PTRDIFF_MAX - 4096, (size_t)PTRDIFF_MAX - PCM_SEGMENT_SIZE,
#if SIZE_MAX > 0xffffffffu
    (size_t)1 << 62, (size_t)1 << 56,
#endif
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static size_t decode_size(struct input *in)
{
    uint8_t kind = next_byte(in);
    uint32_t v = next_u32(in);
    switch (kind % 8) {
    case 0:
    case 1:
    case 2:
        return v % 513; /* tiny: most programs' objects */
    case 3:
        return v % (PCM_SMALL_MAX + 4097); /* any small size and just above */
    case 4:
        return v % MUST_SUCCEED_MAX; /* large */
    case 5:
    case 6:
        return edge_sizes[v % COUNT(edge_sizes)];
    default:
        return impossible_sizes[v % COUNT(impossible_sizes)];
    }
}

/* Alignments: powers of two up to 32 MiB mostly, then the invalid ones. */
static size_t decode_alignment(struct input *in)
{
    uint8_t kind = next_byte(in);
    uint8_t v = next_byte(in);
    switch (kind % 8) {
    case 0:
    case 1:
    case 2:
    case 3:
        return (size_t)1 << (v % 13); /* 1 .. 4096 */
    case 4:
        return (size_t)1 << (v % 26); /* up to 32 MiB */
    case 5:
        return (size_t)v * 3 + 5; /* rarely a power of two */
    case 6:
        return v % 2 ? 0 : sizeof(void *) / 2;
    default:
        return v % 2 ? (size_t)1 << (sizeof(size_t) * 8 - 1) : SIZE_MAX;
    }
}

/* ---- reporting ---- */

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "api_fuzz: operation %u: ", op_index);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
    abort();
}

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond))                                                         \
            fail(__VA_ARGS__);                                               \
    } while (0)

/* ---- contents ---- */

static unsigned char content_byte(uint32_t seed, size_t i)
{
    uint32_t x = seed ^ (uint32_t)i * 0x9E3779B1u ^ (uint32_t)(i >> 16);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    return (unsigned char)(x ^ x >> 12);
}

/* The first offset at or after i that the contents of a `size`-byte
 * object cover: all of the first DENSE_BYTES and the last EDGE_BYTES, and
 * the first 8 bytes of every STRIDE between. */
static size_t next_covered(size_t i, size_t size)
{
    if (i < DENSE_BYTES || size < EDGE_BYTES || i >= size - EDGE_BYTES || i % STRIDE < 8)
        return i;
    size_t next = i - i % STRIDE + STRIDE;
    return next < size - EDGE_BYTES ? next : size - EDGE_BYTES;
}

static void fill(unsigned char *p, size_t size, uint32_t seed)
{
    for (size_t i = next_covered(0, size); i < size; i = next_covered(i + 1, size))
        p[i] = content_byte(seed, i);
}

/* Check the covered bytes of [from, to) of s's object, written with
 * `seed` when it was `size` bytes long. */
static void check_range(const struct slot *s, size_t from, size_t to, size_t size, uint32_t seed, const char *when)
{
    for (size_t i = next_covered(from, size); i < to; i = next_covered(i + 1, size))
        CHECK(s->p[i] == content_byte(seed, i), "%s: byte %zu of the %zu-byte object %p is 0x%02x, expected 0x%02x",
              when, i, s->size, (void *)s->p, s->p[i], content_byte(seed, i));
}

static void check_contents(const struct slot *s, const char *when)
{
    check_range(s, 0, s->size, s->size, s->seed, when);
}

static void check_edges(const struct slot *s, const char *when)
{
    check_range(s, 0, s->size < 16 ? s->size : 16, s->size, s->seed, when);
    if (s->size > 16)
        check_range(s, s->size - 16, s->size, s->size, s->seed, when);
}

/* ---- checks of a new object ---- */

static void check_new(struct slot *s, unsigned index, const char *call)
{
    size_t align = s->alignment < PCM_MIN_ALIGN ? PCM_MIN_ALIGN : s->alignment;
    CHECK((uintptr_t)s->p % align == 0, "%s(%zu) returned %p, not aligned to %zu", call, s->size,
          (void *)s->p, align);
    size_t usable = pcm_malloc_usable_size(s->p);
    CHECK(usable >= s->size, "%s(%zu): malloc_usable_size says %zu", call, s->size, usable);
    /* Everything usable is the program's: write the last byte, which
     * must not land in another live object (checked by the edges). */
    if (usable > s->size) {
        s->p[usable - 1] = 0xee;
    }
    for (unsigned j = 0; j < SLOTS; j++) {
        const struct slot *o = &slots[j];
        if (j == index || !o->p)
            continue;
        size_t o_usable = pcm_malloc_usable_size(o->p);
        bool apart = s->p + usable <= o->p || o->p + o_usable <= s->p;
        CHECK(apart, "%s(%zu) returned %p (usable %zu), overlapping slot %u's %p (usable %zu)", call, s->size,
              (void *)s->p, usable, j, (void *)o->p, o_usable);
    }
}

/* The call had to fail: NULL with this errno. */
static void check_failure(void *p, int err, int want, const char *call, size_t a, size_t b)
{
    CHECK(p == NULL, "%s(%zu, %zu) returned %p; it must fail with errno %d", call, a, b, p, want);
    CHECK(err == want, "%s(%zu, %zu) failed with errno %d, expected %d", call, a, b, err, want);
}

/* ---- the model: must a call fail, and how ---- */

static bool is_power_of_two(size_t x)
{
    return x && !(x & (x - 1));
}

/* What the model expects of `size` bytes at `alignment` (a power of two):
 * up to MUST_SUCCEED_MAX at up to MUST_SUCCEED_ALIGN the fuzzing machine
 * certainly has; from IMPOSSIBLE_MIN on (size or alignment) no machine
 * has; in between (say 2 GiB) either answer is right, but a failure must
 * still be NULL + ENOMEM. */
enum expect { MUST_SUCCEED, MAY_FAIL, MUST_FAIL };

static enum expect expect_of(size_t size, size_t alignment)
{
    if (size >= IMPOSSIBLE_MIN || alignment >= IMPOSSIBLE_MIN)
        return MUST_FAIL;
    if (size <= MUST_SUCCEED_MAX && alignment <= MUST_SUCCEED_ALIGN)
        return MUST_SUCCEED;
    return MAY_FAIL;
}

/* Check an allocation's outcome against the model; true if p is an
 * object to take. */
static bool check_outcome(enum expect e, void *p, int err, const char *call, size_t a, size_t b)
{
    if (e == MUST_FAIL || (e == MAY_FAIL && !p)) {
        check_failure(p, err, ENOMEM, call, a, b);
        return false;
    }
    CHECK(p, "%s(%zu, %zu) failed (errno %d)", call, a, b, err);
    return true;
}

/* ---- operations ---- */

static void slot_free(struct slot *s)
{
    if (!s->p)
        return;
    check_contents(s, "before free");
    errno = 4242;
    pcm_free(s->p);
    CHECK(errno == 4242, "free(%p) changed errno to %d", (void *)s->p, errno);
    s->p = NULL;
}

/* A new object from an allocation call into s (s empty).  One above
 * MUST_SUCCEED_MAX (the model let it succeed or fail: overcommit may give
 * gigabytes that are not there) is checked, touched at both ends and freed
 * at once: writing a pattern into all its pages could exhaust the machine. */
static void slot_take(struct slot *s, unsigned index, void *p, size_t size, size_t alignment, const char *call)
{
    s->p = p;
    s->size = size;
    s->alignment = alignment;
    s->seed = (uint32_t)op_index * 2654435761u + index;
    check_new(s, index, call);
    if (size > MUST_SUCCEED_MAX) {
        s->p[0] = 1;
        s->p[size - 1] = 2;
        errno = 4242;
        pcm_free(s->p);
        CHECK(errno == 4242, "free(%p) changed errno to %d", (void *)s->p, errno);
        s->p = NULL;
        return;
    }
    fill(s->p, size, s->seed);
}

static size_t next_power_of_two(size_t x)
{
    size_t p = 1;
    while (p < x && p)
        p <<= 1;
    return p;
}

static void op_malloc(struct slot *s, unsigned index, struct input *in)
{
    size_t size = decode_size(in);
    slot_free(s);
    errno = 0;
    void *p = pcm_malloc(size);
    int err = errno;
    if (trace)
        fprintf(stderr, "%u: malloc(%zu) = %p\n", op_index, size, p);
    if (check_outcome(expect_of(size, 1), p, err, "malloc", size, 0))
        slot_take(s, index, p, size, 1, "malloc");
}

static void op_calloc(struct slot *s, unsigned index, struct input *in)
{
    size_t count = decode_size(in), size = decode_size(in);
    if (next_byte(in) % 4) /* small counts are the common case */
        count %= 64;
    slot_free(s);
    errno = 0;
    void *p = pcm_calloc(count, size);
    int err = errno;
    if (trace)
        fprintf(stderr, "%u: calloc(%zu, %zu) = %p\n", op_index, count, size, p);
    size_t bytes;
    bool overflow = __builtin_mul_overflow(count, size, &bytes);
    if (!check_outcome(overflow ? MUST_FAIL : expect_of(bytes, 1), p, err, "calloc", count, size))
        return;
    const unsigned char *c = p;
    for (size_t i = next_covered(0, bytes); i < bytes && bytes <= MUST_SUCCEED_MAX; i = next_covered(i + 1, bytes))
        CHECK(c[i] == 0, "calloc(%zu, %zu): byte %zu of %p is 0x%02x, not 0", count, size, i, p, c[i]);
    slot_take(s, index, p, bytes, 1, "calloc");
}

/* realloc and reallocarray of s to `bytes` (overflow: the product a * b
 * overflowed), through fn(s->p, a, b). */
static void do_realloc(struct slot *s, unsigned index, size_t bytes, bool overflow, const char *call, size_t a,
                       size_t b, void *(*fn)(void *, size_t, size_t))
{
    void *old = s->p;
    errno = 0;
    void *p = fn(old, a, b);
    int err = errno;
    if (trace)
        fprintf(stderr, "%u: %s(%p, %zu, %zu) = %p\n", op_index, call, old, a, b, p);
    enum expect e = overflow ? MUST_FAIL : expect_of(bytes, 1);
    if (e == MUST_FAIL || (e == MAY_FAIL && !p)) {
        check_failure(p, err, ENOMEM, call, a, b);
        if (old)
            check_contents(s, "after a failed realloc");
        return;
    }
    if (bytes == 0 && old) { /* glibc: frees, returns NULL */
        CHECK(p == NULL, "%s(%p, 0) returned %p, not NULL", call, old, p);
        s->p = NULL;
        return;
    }
    CHECK(p, "%s(%p, %zu) failed (errno %d)", call, old, bytes, err);
    size_t old_size = s->size, kept = !old ? 0 : old_size < bytes ? old_size : bytes;
    s->p = p;
    if (kept)
        check_range(s, 0, kept, old_size, s->seed, "the contents realloc kept");
    s->p = NULL;
    slot_take(s, index, p, bytes, 1, call);
}

static void *call_realloc(void *p, size_t size, size_t unused)
{
    (void)unused;
    return pcm_realloc(p, size);
}

static void *call_reallocarray(void *p, size_t count, size_t size)
{
    return pcm_reallocarray(p, count, size);
}

static void op_realloc(struct slot *s, unsigned index, struct input *in)
{
    size_t size = decode_size(in);
    do_realloc(s, index, size, false, "realloc", size, 0, call_realloc);
}

static void op_reallocarray(struct slot *s, unsigned index, struct input *in)
{
    size_t count = decode_size(in) % 300, size = decode_size(in);
    if (next_byte(in) % 4 == 0)
        count = SIZE_MAX / 2 + next_byte(in); /* an overflowing product */
    size_t bytes;
    bool overflow = __builtin_mul_overflow(count, size, &bytes);
    do_realloc(s, index, bytes, overflow, "reallocarray", count, size, call_reallocarray);
}

static void op_memalign(struct slot *s, unsigned index, struct input *in)
{
    size_t alignment = decode_alignment(in), size = decode_size(in);
    slot_free(s);
    errno = 0;
    void *p = pcm_memalign(alignment, size);
    int err = errno;
    if (trace)
        fprintf(stderr, "%u: memalign(%zu, %zu) = %p\n", op_index, alignment, size, p);
    /* glibc rounds a non-power of two up; none above SIZE_MAX / 2 + 1. */
    size_t rounded = is_power_of_two(alignment) ? alignment : next_power_of_two(alignment);
    if (alignment && !rounded)
        return check_failure(p, err, EINVAL, "memalign", alignment, size);
    if (!rounded)
        rounded = 1;
    if (check_outcome(expect_of(size, rounded), p, err, "memalign", alignment, size))
        slot_take(s, index, p, size, rounded, "memalign");
}

static void op_posix_memalign(struct slot *s, unsigned index, struct input *in)
{
    size_t alignment = decode_alignment(in), size = decode_size(in);
    slot_free(s);
    void *sentinel = &slots[index], *p = sentinel;
    errno = 4242;
    int rc = pcm_posix_memalign(&p, alignment, size);
    if (trace)
        fprintf(stderr, "%u: posix_memalign(%zu, %zu) = %d, %p\n", op_index, alignment, size, rc, p);
    CHECK(errno == 4242, "posix_memalign(%zu, %zu) changed errno to %d", alignment, size, errno);
    enum expect e = expect_of(size, alignment);
    int want = !is_power_of_two(alignment) || alignment % sizeof(void *) ? EINVAL
               : e == MUST_FAIL || (e == MAY_FAIL && rc)                 ? ENOMEM
                                                                         : 0;
    CHECK(rc == want, "posix_memalign(%zu, %zu) returned %d, expected %d", alignment, size, rc, want);
    if (rc) {
        CHECK(p == sentinel, "posix_memalign(%zu, %zu) failed but wrote %p", alignment, size, p);
        return;
    }
    slot_take(s, index, p, size, alignment, "posix_memalign");
}

static void op_aligned_alloc(struct slot *s, unsigned index, struct input *in)
{
    size_t alignment = decode_alignment(in), size = decode_size(in);
    slot_free(s);
    errno = 0;
    void *p = pcm_aligned_alloc(alignment, size);
    int err = errno;
    if (trace)
        fprintf(stderr, "%u: aligned_alloc(%zu, %zu) = %p\n", op_index, alignment, size, p);
    if (!is_power_of_two(alignment))
        return check_failure(p, err, EINVAL, "aligned_alloc", alignment, size);
    if (check_outcome(expect_of(size, alignment), p, err, "aligned_alloc", alignment, size))
        slot_take(s, index, p, size, alignment, "aligned_alloc");
}

static void op_free(struct slot *s)
{
    if (trace)
        fprintf(stderr, "%u: free(%p)\n", op_index, (void *)s->p);
    if (!s->p) {
        errno = 4242;
        pcm_free(NULL);
        CHECK(errno == 4242, "free(NULL) changed errno to %d", errno);
        return;
    }
    slot_free(s);
}

static void op_free_sized(struct slot *s)
{
    if (trace)
        fprintf(stderr, "%u: free_sized(%p, %zu)\n", op_index, (void *)s->p, s->size);
    if (!s->p)
        return;
    check_contents(s, "before free_sized");
    errno = 4242;
    /* The size asked for is the one a program must pass (C23); an
     * object from realloc remembers its last size. */
    if (s->alignment > PCM_MIN_ALIGN)
        pcm_free_aligned_sized(s->p, s->alignment, s->size);
    else
        pcm_free_sized(s->p, s->size);
    CHECK(errno == 4242, "free_sized(%p, %zu) changed errno to %d", (void *)s->p, s->size, errno);
    s->p = NULL;
}

static void op_usable_size(struct slot *s)
{
    size_t usable = pcm_malloc_usable_size(s->p);
    if (trace)
        fprintf(stderr, "%u: malloc_usable_size(%p) = %zu\n", op_index, (void *)s->p, usable);
    if (!s->p) {
        CHECK(usable == 0, "malloc_usable_size(NULL) = %zu", usable);
        return;
    }
    CHECK(usable >= s->size, "malloc_usable_size(%p) = %zu, below the %zu bytes asked for", (void *)s->p, usable,
          s->size);
}

static void op_realloc_zero(struct slot *s)
{
    if (trace)
        fprintf(stderr, "%u: realloc(%p, 0)\n", op_index, (void *)s->p);
    if (!s->p)
        return; /* realloc(NULL, 0) is malloc(0): op_malloc covers it */
    check_contents(s, "before realloc(p, 0)");
    void *p = pcm_realloc(s->p, 0);
    CHECK(p == NULL, "realloc(%p, 0) returned %p; glibc frees and returns NULL", (void *)s->p, p);
    s->p = NULL;
}

static void op_rewrite(struct slot *s, unsigned index)
{
    if (!s->p)
        return;
    check_contents(s, "before rewriting");
    s->seed = (uint32_t)op_index * 2246822519u + index;
    fill(s->p, s->size, s->seed);
}

/* ---- the entry point ---- */

static void free_everything(void)
{
    for (unsigned i = 0; i < SLOTS; i++)
        slot_free(&slots[i]);
    pcm_malloc_trim(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    static bool started;
    if (!started) {
        const char *t = getenv("PCM_FUZZ_TRACE");
        trace = t && *t == '1';
        started = true;
    }
    struct input in = {data, len, 0};
    for (op_index = 0; op_index < MAX_OPS && in.at < in.len; op_index++) {
        uint8_t op = next_byte(&in);
        unsigned index = next_byte(&in) % SLOTS;
        struct slot *s = &slots[index];
        switch (op % 12) {
        case 0: op_malloc(s, index, &in); break;
        case 1: op_calloc(s, index, &in); break;
        case 2: op_realloc(s, index, &in); break;
        case 3: op_reallocarray(s, index, &in); break;
        case 4: op_memalign(s, index, &in); break;
        case 5: op_posix_memalign(s, index, &in); break;
        case 6: op_aligned_alloc(s, index, &in); break;
        case 7: op_free(s); break;
        case 8: op_free_sized(s); break;
        case 9: op_usable_size(s); break;
        case 10: op_realloc_zero(s); break;
        default: op_rewrite(s, index); break;
        }
        if (s->p)
            check_contents(s, "the object just used");
        for (unsigned j = 0; j < SLOTS; j++)
            if (slots[j].p)
                check_edges(&slots[j], "a live object's edges");
    }
    free_everything();
    return 0;
}
