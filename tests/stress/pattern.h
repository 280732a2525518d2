/*
 * tests/stress/pattern.h - what the stress tests write into every object
 * they allocate, and the check that finds any byte someone else changed.
 *
 * An object is identified by (address, size, tag): the tag is the caller's
 * (an allocation serial number, say), so two objects that were handed out
 * at the same address get different contents.  From the three a 64-bit key
 * is mixed, and from the key and a byte offset the byte each position must
 * hold.  The contents depend on the address: a copy of an object's bytes
 * to another place (a realloc gone wrong, a stale duplicate) is caught too.
 *
 * What is written (the same for the fill and the check):
 *   - size <= PCM_PATTERN_DENSE_MAX: every byte;
 *   - larger objects: the first and the last PCM_PATTERN_EDGE bytes, and
 *     one 8-byte word at each multiple of PCM_PATTERN_STRIDE between them
 *     (one word per page), so a 4 MiB object costs a few KiB to write and
 *     check, yet a page mapped twice or lost is still noticed.
 *
 * Header only, no allocation, nothing but <string.h> from libc: shared by
 * tests/stress/random_sizes.c, producer_consumer.c and fault_detected.c.
 */
#ifndef PCM_TEST_STRESS_PATTERN_H
#define PCM_TEST_STRESS_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PCM_PATTERN_DENSE_MAX ((size_t)64 * 1024)
#define PCM_PATTERN_EDGE ((size_t)4096)
#define PCM_PATTERN_STRIDE ((size_t)4096)

/* pcm_pattern_check's answer when every covered byte is as written. */
#define PCM_PATTERN_OK ((size_t)-1)

static inline uint64_t pcm_pattern_mix(uint64_t x)
{
    /* splitmix64's finaliser: every input bit changes every output bit */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t pcm_pattern_key(const void *p, size_t size, uint64_t tag)
{
    return pcm_pattern_mix((uint64_t)(uintptr_t)p ^ pcm_pattern_mix((uint64_t)size + 0x9E3779B97F4A7C15ull)
                           ^ pcm_pattern_mix(tag ^ 0xD1B54A32D192ED03ull));
}

/* The 8 bytes at offset `base` (a multiple of 8) hold this word, in the
 * machine's byte order. */
static inline uint64_t pcm_pattern_word(uint64_t key, size_t base)
{
    uint64_t x = key + (uint64_t)base * 0x9E3779B97F4A7C15ull;
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x;
}

/* The byte at `offset` of an object with this key. */
static inline unsigned char pcm_pattern_byte(uint64_t key, size_t offset)
{
    uint64_t word = pcm_pattern_word(key, offset & ~(size_t)7);
    unsigned char bytes[8];
    memcpy(bytes, &word, sizeof bytes);
    return bytes[offset & 7];
}

/* Write (write == true) or compare bytes [lo, hi) of object p.  Returns
 * the first offset that differs, or PCM_PATTERN_OK. */
static inline size_t pcm_pattern_range(unsigned char *p, size_t lo, size_t hi, uint64_t key, bool write)
{
    size_t i = lo;
    while (i < hi) {
        size_t base = i & ~(size_t)7;
        uint64_t word = pcm_pattern_word(key, base);
        if (i == base && hi - i >= 8) {
            if (write) {
                memcpy(p + i, &word, 8);
            } else {
                uint64_t seen;
                memcpy(&seen, p + i, 8);
                if (seen != word)
                    break; /* the byte loop below finds which byte */
            }
            i += 8;
            continue;
        }
        unsigned char bytes[8];
        memcpy(bytes, &word, sizeof bytes);
        size_t end = base + 8 < hi ? base + 8 : hi;
        for (; i < end; i++) {
            if (write)
                p[i] = bytes[i - base];
            else if (p[i] != bytes[i - base])
                return i;
        }
    }
    if (i >= hi)
        return PCM_PATTERN_OK;
    for (size_t end = i + 8; i < end; i++) /* a word differed: name its byte */
        if (p[i] != pcm_pattern_byte(key, i))
            return i;
    return PCM_PATTERN_OK; /* not reached */
}

/* Every region the pattern covers in an object of `size` bytes. */
static inline size_t pcm_pattern_apply(void *object, size_t size, uint64_t tag, bool write)
{
    unsigned char *p = object;
    uint64_t key = pcm_pattern_key(object, size, tag);
    if (size <= PCM_PATTERN_DENSE_MAX)
        return pcm_pattern_range(p, 0, size, key, write);
    size_t bad = pcm_pattern_range(p, 0, PCM_PATTERN_EDGE, key, write);
    if (bad != PCM_PATTERN_OK)
        return bad;
    size_t tail = size - PCM_PATTERN_EDGE;
    for (size_t at = PCM_PATTERN_STRIDE; at + 8 <= tail; at += PCM_PATTERN_STRIDE) {
        bad = pcm_pattern_range(p, at, at + 8, key, write);
        if (bad != PCM_PATTERN_OK)
            return bad;
    }
    return pcm_pattern_range(p, tail, size, key, write);
}

/* Fill object (size bytes, identified also by tag) with its pattern. */
static inline void pcm_pattern_fill(void *object, size_t size, uint64_t tag)
{
    pcm_pattern_apply(object, size, tag, true);
}

/* PCM_PATTERN_OK if object still holds what pcm_pattern_fill wrote with
 * the same size and tag, else the offset of the first byte that differs. */
static inline size_t pcm_pattern_check(const void *object, size_t size, uint64_t tag)
{
    return pcm_pattern_apply((void *)object, size, tag, false);
}

/* For a failure message: the byte pcm_pattern_fill put at offset. */
static inline unsigned pcm_pattern_expected(const void *object, size_t size, uint64_t tag, size_t offset)
{
    return pcm_pattern_byte(pcm_pattern_key(object, size, tag), offset);
}

#endif
