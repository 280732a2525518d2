/*
 * api_pattern.h - what the API conformance tests share: size units and a
 * byte pattern to fill objects with and find the first byte that lost it.
 * The pattern depends on the offset and a seed, not on the address, so it
 * survives realloc moving an object; a copy shifted by any offset, or
 * another object's bytes, mismatch.
 */
#ifndef PCM_TEST_API_PATTERN_H
#define PCM_TEST_API_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

static inline unsigned char pattern_byte(size_t i, uintptr_t seed)
{
    uint32_t x =
        ((uint32_t)i ^ (uint32_t)(i >> 11) ^ (uint32_t)seed ^ (uint32_t)(seed >> 13)) * 0x9E3779B1u;
    return (unsigned char)(x >> 24);
}

static inline void fill_range(void *p, size_t from, size_t to, uintptr_t seed)
{
    unsigned char *b = p;
    for (size_t i = from; i < to; i++)
        b[i] = pattern_byte(i, seed);
}

static inline void fill(void *p, size_t n, uintptr_t seed)
{
    fill_range(p, 0, n, seed);
}

/* Offset of the first byte in [0, n) that does not hold the pattern, or
 * SIZE_MAX. */
static inline size_t first_mismatch(const void *p, size_t n, uintptr_t seed)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern_byte(i, seed))
            return i;
    return SIZE_MAX;
}

#endif
