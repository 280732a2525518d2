/*
 * stats.h - counters for PCMALLOC_STATS and malloc_stats().
 *
 * Global counters change only on slow paths (a segment or large mapping
 * made or given back), by fetch-and-add; per-heap counters live in the
 * heap and change under its lock.  The fast path counts nothing.
 */
#ifndef PCM_STATS_H
#define PCM_STATS_H

#include <stddef.h>

#include "atomic.h"

struct pcm_stats_totals {
    pcm_word_t segments;        /* segments mapped (never unmapped) */
    pcm_word_t large_objects;   /* large mappings now (live or cached) */
    pcm_word_t large_bytes;     /* bytes in large mappings now */
    pcm_word_t mapped_bytes;    /* segments + large mappings now */
    pcm_word_t peak_mapped_bytes;
    /* An upper bound of the memory touched: segment headers, every page
     * objects were ever cut from (nothing is decommitted yet), large
     * mappings. */
    pcm_word_t committed_bytes;
    pcm_word_t peak_committed_bytes;
};

void pcm_stats_segment_mapped(size_t bytes);
void pcm_stats_committed(size_t bytes);
void pcm_stats_large_created(size_t bytes);
void pcm_stats_large_resized(size_t old_bytes, size_t new_bytes);
void pcm_stats_large_destroyed(size_t bytes);
void pcm_stats_totals_read(struct pcm_stats_totals *out);

/* Where the report goes: stderr, or the copy of it that
 * pcm_stats_keep_stderr made at start-up - programs such as sort(1) close
 * stderr before the library destructors that print the report at exit. */
extern int pcm_stats_fd __attribute__((visibility("hidden")));
void pcm_stats_keep_stderr(void);

/* The report of PCMALLOC_STATS=1 and malloc_stats(), on stderr. */
void pcm_stats_print(void);

#endif
