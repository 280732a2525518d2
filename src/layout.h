/*
 * layout.h - the fixed geometry of pcmalloc's address space use.
 *
 * Segments are PCM_SEGMENT_SIZE-aligned mappings of that size; each holds
 * spans of 4 KiB pages (PCM_PAGE_SIZE, the size-class table's unit, not
 * necessarily the kernel's page).  Large objects get mappings of their own
 * that also start on a segment boundary, so one map from segment-sized
 * chunks of the address space to their owner (segment_map.h) finds the
 * metadata of any pointer pcmalloc handed out.
 */
#ifndef PCM_LAYOUT_H
#define PCM_LAYOUT_H

#include "sizeclass.h"

#define PCM_PAGE_SHIFT 12u
#define PCM_PAGE_SIZE ((size_t)1 << PCM_PAGE_SHIFT)
#define PCM_SEGMENT_SHIFT 22u
#define PCM_SEGMENT_SIZE ((size_t)1 << PCM_SEGMENT_SHIFT)
#define PCM_SEGMENT_PAGES (PCM_SEGMENT_SIZE >> PCM_PAGE_SHIFT)

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
