/*
 * layout.h - the fixed geometry of pcmalloc's address space use.
 *
 * Segments are PCM_SEGMENT_SIZE-aligned mappings of that size; each holds
 * spans of 4 KiB pages (PCM_PAGE_SIZE, the size-class table's unit, not
 * necessarily the kernel's page).  Large objects get mappings of their own
 * that start on a PCM_MAP_GRANULE boundary, so one map from granules of the
 * address space to their owner (segment_map.h) finds the metadata of any
 * pointer pcmalloc handed out.
 */
#ifndef PCM_LAYOUT_H
#define PCM_LAYOUT_H

#include "sizeclass.h"

#define PCM_PAGE_SHIFT 12u
#define PCM_PAGE_SIZE ((size_t)1 << PCM_PAGE_SHIFT)
#define PCM_SEGMENT_SHIFT 22u
#define PCM_SEGMENT_SIZE ((size_t)1 << PCM_SEGMENT_SHIFT)
#define PCM_SEGMENT_PAGES (PCM_SEGMENT_SIZE >> PCM_PAGE_SHIFT)

/* The segment map's granule, and so the alignment of large mappings.
 * 64-bit: a segment, one map entry per 4 MiB of address space, which is
 * plentiful.  32-bit: 64 KiB.  A large object (above 256 KiB) on a
 * segment-aligned mapping of its own left the rest of its 4 MiB chunk to
 * no other large object: 4 GiB of address space then held 1020 large
 * objects of 300,000 bytes (292 MiB), where glibc holds 14,000 of them.
 * 64 KiB granules cost a 2^16-entry map (256 KiB of address space,
 * written only where pcmalloc maps) and waste at most 60 KiB a mapping. */
#if UINTPTR_MAX == 0xffffffffu
#define PCM_MAP_SHIFT 16u
#else
#define PCM_MAP_SHIFT PCM_SEGMENT_SHIFT
#endif
#define PCM_MAP_GRANULE ((size_t)1 << PCM_MAP_SHIFT)
_Static_assert(PCM_SEGMENT_SIZE % PCM_MAP_GRANULE == 0, "a segment covers whole granules");

/* A transparent huge page (PMD size on x86_64, arm64 with 4 KiB pages and
 * PAE i686): with PCMALLOC_HUGEPAGES=1 a segment's two halves can each be
 * one (segments are aligned to twice this); segment.h says how decay
 * treats them. */
#define PCM_HUGE_PAGE_SHIFT 21u
#define PCM_HUGE_PAGE_SIZE ((size_t)1 << PCM_HUGE_PAGE_SHIFT)
#define PCM_HUGE_PAGE_PAGES (PCM_HUGE_PAGE_SIZE >> PCM_PAGE_SHIFT)
_Static_assert(PCM_SEGMENT_SIZE % PCM_HUGE_PAGE_SIZE == 0, "segments hold whole huge pages");

/* Every object pcmalloc returns is at least this aligned (glibc's promise
 * on i386 as on x86_64 and arm64). */
#define PCM_MIN_ALIGN 16u

_Static_assert(PCM_PAGE_SIZE == PCM_SPAN_PAGE_BYTES, "spans count in layout pages");

#define PCM_ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((a) - 1))

#endif
