/*
 * stats.c - the counters of stats.h and the report.  No malloc, no stdio:
 * the report is written line by line through pcm_message.
 */
#include "stats.h"

#include <fcntl.h>

#include "heap.h"
#include "message.h"
#include "options.h"
#include "sizeclass.h"

static struct {
    volatile pcm_word_t segments, large_objects, large_bytes, mapped_bytes, peak_mapped_bytes;
} totals;

static void mapped(size_t bytes)
{
    pcm_word_t now = pcm_fetch_add_acq_rel(&totals.mapped_bytes, bytes) + bytes;
    pcm_word_t peak = pcm_load_relaxed(&totals.peak_mapped_bytes);
    while (now > peak && !pcm_cas_acq_rel(&totals.peak_mapped_bytes, &peak, now))
        ;
}

void pcm_stats_segment_mapped(size_t bytes)
{
    pcm_fetch_add_acq_rel(&totals.segments, 1);
    mapped(bytes);
}

void pcm_stats_large_created(size_t bytes)
{
    pcm_fetch_add_acq_rel(&totals.large_objects, 1);
    pcm_fetch_add_acq_rel(&totals.large_bytes, bytes);
    mapped(bytes);
}

static void unmapped(size_t bytes)
{
    pcm_fetch_sub_acq_rel(&totals.large_bytes, bytes);
    pcm_fetch_sub_acq_rel(&totals.mapped_bytes, bytes);
}

void pcm_stats_large_resized(size_t old_bytes, size_t new_bytes)
{
    if (new_bytes > old_bytes) {
        pcm_fetch_add_acq_rel(&totals.large_bytes, new_bytes - old_bytes);
        mapped(new_bytes - old_bytes);
    } else {
        unmapped(old_bytes - new_bytes);
    }
}

void pcm_stats_large_destroyed(size_t bytes)
{
    pcm_fetch_sub_acq_rel(&totals.large_objects, 1);
    unmapped(bytes);
}

void pcm_stats_totals_read(struct pcm_stats_totals *out)
{
    out->segments = pcm_load_relaxed(&totals.segments);
    out->large_objects = pcm_load_relaxed(&totals.large_objects);
    out->large_bytes = pcm_load_relaxed(&totals.large_bytes);
    out->mapped_bytes = pcm_load_relaxed(&totals.mapped_bytes);
    out->peak_mapped_bytes = pcm_load_relaxed(&totals.peak_mapped_bytes);
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
    pcm_message_to(pcm_stats_fd, "stats: %s build, %u per-CPU heaps", PCM_ARCH_NAME, pcm_heap_count);
    pcm_message_to(pcm_stats_fd, "stats: %lu segments, %lu large mappings, %lu KiB mapped now, %lu KiB at peak",
                (unsigned long)t.segments, (unsigned long)t.large_objects,
                (unsigned long)(t.mapped_bytes >> 10), (unsigned long)(t.peak_mapped_bytes >> 10));
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
    pcm_message_to(pcm_stats_fd, "stats: %6s %10s %10s %12s %10s %10s", "heap", "refills", "flushes", "remote frees",
                "spans+", "spans-");
    for (unsigned h = 0; h < pcm_heap_count; h++) {
        const struct pcm_heap_stats *s = &pcm_heaps[h].stats;
        if (s->refills || s->remote_drained)
            pcm_message_to(pcm_stats_fd, "stats: %6u %10lu %10lu %12lu %10lu %10lu", h, (unsigned long)s->refills,
                        (unsigned long)s->flushes, (unsigned long)s->remote_drained,
                        (unsigned long)s->spans_created, (unsigned long)s->spans_released);
    }
}
