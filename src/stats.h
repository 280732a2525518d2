/*
 * stats.h - counters for PCMALLOC_STATS, malloc_stats(), pcm_stats_json()
 * and malloc_info(), and the readers the reports share.
 *
 * Global counters change only on slow paths (a segment, span or large
 * mapping made or given back), by fetch-and-add; per-heap counters live in
 * the heap and change under its lock.  The fast path counts nothing, and
 * nothing here may ever be called from it.  What each number means for a
 * reader, and how exact it is, is written in docs/pcmalloc.7.in.
 */
#ifndef PCM_STATS_H
#define PCM_STATS_H

#include <stddef.h>

#include "atomic.h"

struct pcm_stats_totals {
    pcm_word_t segments;        /* segments in heaps (not the pool's chunks) */
    pcm_word_t pooled_chunks;   /* chunks in the segment pool (segment_pool.h) */
    pcm_word_t unmapped_segments; /* segments given back to the OS since start-up */
    pcm_word_t large_objects;   /* large mappings now (live or cached) */
    pcm_word_t large_bytes;     /* bytes in large mappings now */
    pcm_word_t large_cached;    /* of those, mappings kept for reuse */
    pcm_word_t large_cached_bytes;
    pcm_word_t mapped_bytes;    /* segments + large mappings now */
    pcm_word_t peak_mapped_bytes;
    /* An upper bound of the memory touched: segment headers, every page
     * objects were cut from and not given back since (decay, trim, the
     * segment pool), large mappings. */
    pcm_word_t committed_bytes;
    pcm_word_t peak_committed_bytes;
};

void pcm_stats_segment_mapped(size_t bytes);
void pcm_stats_committed(size_t bytes);
/* Pages given back to the OS (they count as committed again once rewritten). */
void pcm_stats_decommitted(size_t bytes);
/* A segment went to the pool / one came back from it (segment_pool.h):
 * its chunk stays mapped. */
void pcm_stats_segment_pooled(void);
/* Address space the pool mapped to join a run (segment_pool.c). */
void pcm_stats_pool_mapped(size_t bytes);
void pcm_stats_segment_unpooled(void);
/* A segment given back to the OS instead (segment_pool.h). */
void pcm_stats_segment_unmapped(size_t bytes);
/* A large object on pooled chunks / those chunks back to the pool: its
 * bytes are mapped already (counted committed while it lives). */
void pcm_stats_large_adopted(size_t bytes);
void pcm_stats_large_returned(size_t bytes);
void pcm_stats_large_created(size_t bytes);
void pcm_stats_large_resized(size_t old_bytes, size_t new_bytes);
void pcm_stats_large_destroyed(size_t bytes);
void pcm_stats_totals_read(struct pcm_stats_totals *out);

/* One size class, summed over the heaps (read without their locks: each
 * word is whole, but two words may be from slightly different moments). */
struct pcm_stats_class {
    size_t size;          /* object bytes */
    pcm_word_t requests;  /* objects refills took from spans to the caches */
    pcm_word_t live;      /* requests minus objects back in spans: in use or cached */
    pcm_word_t spans, peak_spans;
    pcm_word_t peak;      /* peak_spans * objects per span: an upper bound */
};
void pcm_stats_class_read(unsigned cls, struct pcm_stats_class *out);

/* One per-CPU heap. */
struct pcm_stats_heap {
    pcm_word_t requests;     /* objects refills took from this heap's spans */
    pcm_word_t local_frees;  /* objects a flush of this CPU's full cache gave back */
    pcm_word_t remote_frees; /* objects freed on other CPUs, drained by this heap */
    pcm_word_t refills, flushes, spans_created, spans_released;
};
void pcm_stats_heap_read(unsigned heap, struct pcm_stats_heap *out);
/* Bytes of small objects out of spans (in use or cached), all classes. */
pcm_word_t pcm_stats_small_live_bytes(void);

/* Where the report goes: stderr, or the copy of it that
 * pcm_stats_keep_stderr made at start-up - programs such as sort(1) close
 * stderr before the library destructors that print the report at exit. */
extern int pcm_stats_fd __attribute__((visibility("hidden")));
void pcm_stats_keep_stderr(void);

/* The table of PCMALLOC_STATS=1 and malloc_stats(), on pcm_stats_fd
 * (stats_text.c). */
void pcm_stats_print(void);

/* The JSON document of PCMALLOC_STATS=json and pcm_stats_json()
 * (stats_json.c): into any sink, or on pcm_stats_fd. */
struct pcm_sink;
void pcm_stats_json_write(struct pcm_sink *sink);
void pcm_stats_json_print(void);

#endif
