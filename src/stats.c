/*
 * stats.c - the counters of stats.h and their readers.  The reports that
 * print them are stats_text.c, stats_json.c and malloc_info.c.  Never
 * here: malloc, stdio, a lock, or anything the fast path would call.
 */
#include "stats.h"

#include <fcntl.h>
#include <string.h>

#include "heap.h"
#include "large_cache.h"
#include "segment_pool.h"
#include "sizeclass.h"

static struct {
    volatile pcm_word_t segments, unmapped_segments, large_objects, large_bytes;
    volatile pcm_word_t mapped_bytes, peak_mapped_bytes;
    volatile pcm_word_t committed_bytes, peak_committed_bytes;
} totals;

/* *now += bytes, and raise *peak to it. */
static void grow(volatile pcm_word_t *now, volatile pcm_word_t *peak, size_t bytes)
{
    pcm_word_t value = pcm_fetch_add_acq_rel(now, bytes) + bytes;
    pcm_word_t seen = pcm_load_relaxed(peak);
    while (value > seen && !pcm_cas_acq_rel(peak, &seen, value))
        ;
}

void pcm_stats_segment_mapped(size_t bytes)
{
    pcm_fetch_add_acq_rel(&totals.segments, 1);
    grow(&totals.mapped_bytes, &totals.peak_mapped_bytes, bytes);
}

void pcm_stats_committed(size_t bytes)
{
    grow(&totals.committed_bytes, &totals.peak_committed_bytes, bytes);
}

void pcm_stats_decommitted(size_t bytes)
{
    pcm_fetch_sub_acq_rel(&totals.committed_bytes, bytes);
}

static void large_grew(size_t bytes)
{
    pcm_fetch_add_acq_rel(&totals.large_bytes, bytes);
    grow(&totals.mapped_bytes, &totals.peak_mapped_bytes, bytes);
    pcm_stats_committed(bytes);
}

static void large_shrank(size_t bytes)
{
    pcm_fetch_sub_acq_rel(&totals.large_bytes, bytes);
    pcm_fetch_sub_acq_rel(&totals.mapped_bytes, bytes);
    pcm_fetch_sub_acq_rel(&totals.committed_bytes, bytes);
}

void pcm_stats_segment_pooled(void)
{
    pcm_fetch_sub_acq_rel(&totals.segments, 1);
}

void pcm_stats_pool_mapped(size_t bytes)
{
    grow(&totals.mapped_bytes, &totals.peak_mapped_bytes, bytes);
}

void pcm_stats_segment_unpooled(void)
{
    pcm_fetch_add_acq_rel(&totals.segments, 1);
}

void pcm_stats_segment_unmapped(size_t bytes)
{
    pcm_fetch_sub_acq_rel(&totals.segments, 1);
    pcm_fetch_add_acq_rel(&totals.unmapped_segments, 1);
    pcm_fetch_sub_acq_rel(&totals.mapped_bytes, bytes);
}

void pcm_stats_large_adopted(size_t bytes)
{
    pcm_fetch_add_acq_rel(&totals.large_objects, 1);
    pcm_fetch_add_acq_rel(&totals.large_bytes, bytes);
    pcm_stats_committed(bytes);
}

void pcm_stats_large_returned(size_t bytes)
{
    pcm_fetch_sub_acq_rel(&totals.large_objects, 1);
    pcm_fetch_sub_acq_rel(&totals.large_bytes, bytes);
    pcm_stats_decommitted(bytes);
}

void pcm_stats_large_created(size_t bytes)
{
    pcm_fetch_add_acq_rel(&totals.large_objects, 1);
    large_grew(bytes);
}

void pcm_stats_large_resized(size_t old_bytes, size_t new_bytes)
{
    if (new_bytes > old_bytes)
        large_grew(new_bytes - old_bytes);
    else
        large_shrank(old_bytes - new_bytes);
}

void pcm_stats_large_destroyed(size_t bytes)
{
    pcm_fetch_sub_acq_rel(&totals.large_objects, 1);
    large_shrank(bytes);
}

void pcm_stats_totals_read(struct pcm_stats_totals *out)
{
    out->segments = pcm_load_relaxed(&totals.segments);
    out->pooled_chunks = pcm_segment_pool_count();
    out->unmapped_segments = pcm_load_relaxed(&totals.unmapped_segments);
    out->large_objects = pcm_load_relaxed(&totals.large_objects);
    out->large_bytes = pcm_load_relaxed(&totals.large_bytes);
    out->large_cached = pcm_large_cache_count();
    out->large_cached_bytes = pcm_large_cache_bytes();
    out->mapped_bytes = pcm_load_relaxed(&totals.mapped_bytes);
    out->peak_mapped_bytes = pcm_load_relaxed(&totals.peak_mapped_bytes);
    out->committed_bytes = pcm_load_relaxed(&totals.committed_bytes);
    out->peak_committed_bytes = pcm_load_relaxed(&totals.peak_committed_bytes);
}

int pcm_stats_fd = 2;

void pcm_stats_keep_stderr(void)
{
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0)
        pcm_stats_fd = fd;
}

/* A counter another CPU writes under its heap's lock: one whole word. */
static pcm_word_t read_counter(const pcm_word_t *counter)
{
    return pcm_load_relaxed((volatile pcm_word_t *)counter);
}

/* The same of a 32-bit one (an aligned 32-bit load is whole on every
 * architecture pcmalloc builds for). */
static pcm_word_t read_count32(const uint32_t *counter)
{
    return *(const volatile uint32_t *)counter;
}

void pcm_stats_class_read(unsigned cls, struct pcm_stats_class *out)
{
    pcm_word_t served = 0, returned = 0, spans = 0, peak_spans = 0;
    for (unsigned h = 0; pcm_heaps && h < pcm_heap_count; h++) {
        if (!pcm_heap_is_ready(h))
            continue; /* all zeroes, and not to be touched */
        served += read_counter(&pcm_heaps[h].stats.served[cls]);
        returned += read_counter(&pcm_heaps[h].stats.returned[cls]);
        spans += read_count32(&pcm_heaps[h].stats.spans[cls]);
        peak_spans += read_count32(&pcm_heaps[h].stats.peak_spans[cls]);
    }
    out->size = pcm_class_size(cls);
    out->requests = served;
    /* Read at slightly different moments, returned can be ahead. */
    out->live = served > returned ? served - returned : 0;
    out->spans = spans;
    out->peak_spans = peak_spans; /* each heap's own peak: their sum bounds the class's */
    out->peak = out->peak_spans * pcm_class_span_objects(cls);
}

void pcm_stats_heap_read(unsigned heap, struct pcm_stats_heap *out)
{
    const struct pcm_heap_stats *s = &pcm_heaps[heap].stats;
    pcm_word_t returned = 0;
    if (!pcm_heap_is_ready(heap)) {
        /* all zeroes, and reading them would map the heap's pages */
        memset(out, 0, sizeof *out);
        return;
    }
    out->requests = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        out->requests += read_counter(&s->served[c]);
        returned += read_counter(&s->returned[c]);
    }
    /* An object comes back to a span by a flush or by a remote drain. */
    out->remote_frees = read_counter(&s->remote_drained);
    out->local_frees = returned > out->remote_frees ? returned - out->remote_frees : 0;
    out->refills = read_counter(&s->refills);
    out->flushes = read_counter(&s->flushes);
    out->spans_created = read_counter(&s->spans_created);
    out->spans_released = read_counter(&s->spans_released);
}

pcm_word_t pcm_stats_small_live_bytes(void)
{
    pcm_word_t bytes = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        struct pcm_stats_class row;
        pcm_stats_class_read(c, &row);
        bytes += row.live * row.size;
    }
    return bytes;
}
