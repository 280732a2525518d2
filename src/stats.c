/*
 * stats.c - the counters of stats.h and the report.  No malloc, no stdio:
 * the report is written line by line through pcm_message.
 */
#include "stats.h"

#include <fcntl.h>

#include "cpu.h"
#include "fast_path.h"
#include "heap.h"
#include "message.h"
#include "options.h"
#include "sizeclass.h"

static struct {
    volatile pcm_word_t segments, large_objects, large_bytes;
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
    out->large_objects = pcm_load_relaxed(&totals.large_objects);
    out->large_bytes = pcm_load_relaxed(&totals.large_bytes);
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

void pcm_stats_print(void)
{
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    pcm_message_to(pcm_stats_fd, "stats: %s build (%s atomics), %u per-CPU heaps, CPU number from %s",
                   PCM_ARCH_NAME, pcm_arch_variant_name(pcm_arch_variant_current()), pcm_heap_count,
                   pcm_cpu_source());
    pcm_message_to(pcm_stats_fd, "stats: fast path %s (%s), %lu restarted sections", pcm_fast_path_name(),
                   pcm_fast_path_reason(), (unsigned long)pcm_fast_path_restarts());
    pcm_message_to(pcm_stats_fd, "stats: %lu segments, %lu large mappings, %lu KiB mapped now, %lu KiB at peak",
                (unsigned long)t.segments, (unsigned long)t.large_objects,
                (unsigned long)(t.mapped_bytes >> 10), (unsigned long)(t.peak_mapped_bytes >> 10));
    pcm_message_to(pcm_stats_fd, "stats: %lu KiB committed now, %lu KiB at peak (segment headers, pages objects were "
                                 "cut from, large mappings)",
                   (unsigned long)(t.committed_bytes >> 10), (unsigned long)(t.peak_committed_bytes >> 10));
    if (!pcm_heaps)
        return;
    pcm_message_to(pcm_stats_fd, "stats: %8s %12s %12s", "class", "served", "returned");
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        unsigned long served = 0, returned = 0;
        for (unsigned h = 0; h < pcm_heap_count; h++) {
            served += pcm_heaps[h].stats.served[c];
            returned += pcm_heaps[h].stats.returned[c];
        }
        if (served)
            pcm_message_to(pcm_stats_fd, "stats: %8zu %12lu %12lu", pcm_class_size(c), served, returned);
    }
    pcm_message_to(pcm_stats_fd, "stats: %6s %12s %12s %10s %10s %12s %8s %8s", "heap", "served", "returned",
                   "refills", "flushes", "remote frees", "spans+", "spans-");
    for (unsigned h = 0; h < pcm_heap_count; h++) {
        const struct pcm_heap_stats *s = &pcm_heaps[h].stats;
        unsigned long served = 0, returned = 0;
        for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
            served += s->served[c];
            returned += s->returned[c];
        }
        if (served || s->remote_drained)
            pcm_message_to(pcm_stats_fd, "stats: %6u %12lu %12lu %10lu %10lu %12lu %8lu %8lu", h, served, returned,
                           (unsigned long)s->refills, (unsigned long)s->flushes, (unsigned long)s->remote_drained,
                           (unsigned long)s->spans_created, (unsigned long)s->spans_released);
    }
}
