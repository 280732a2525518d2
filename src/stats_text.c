/*
 * stats_text.c - the statistics table a person reads: PCMALLOC_STATS=1 at
 * exit and malloc_stats() on demand, on pcm_stats_fd (stderr).
 *
 * Every line starts with "pcmalloc: " (the program's own stderr is mixed
 * in) and is one write(2).  Columns are aligned for numbers up to 10^12.
 * Never here: malloc, stdio, a lock, or a change of the caller's errno.
 * The meaning of each column is documented in docs/pcmalloc.7.in; keep the
 * two in step, and tests/programs/lib.sh, which reads this table.
 */
#include "stats.h"

#include <errno.h>

#include "atomic.h"
#include "cpu.h"
#include "fast_path.h"
#include "heap.h"
#include "pcmalloc.h"
#include "report_sink.h"
#include "sizeclass.h"

#define KIB(bytes) ((unsigned long)((bytes) >> 10))

static void print_header(struct pcm_sink *out)
{
    pcm_sink_printf(out, "pcmalloc: statistics of pcmalloc %s: %s build (%s atomics), %u per-CPU heaps, CPU number from %s\n",
                    PCMALLOC_VERSION, PCM_ARCH_NAME, pcm_arch_variant_name(pcm_arch_variant_current()),
                    pcm_heap_count, pcm_cpu_source());
    pcm_sink_printf(out, "pcmalloc: fast path %s (%s), %lu restarted sections\n", pcm_fast_path_name(),
                    pcm_fast_path_reason(), (unsigned long)pcm_fast_path_restarts());
}

static void print_totals(struct pcm_sink *out)
{
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    pcm_sink_printf(out, "pcmalloc: %-12s %14s %14s\n", "memory", "now", "peak");
    pcm_sink_printf(out,
                    "pcmalloc: %-12s %10lu KiB %10lu KiB   %lu segments, %lu pooled, %lu unmapped, "
                    "%lu large mappings\n",
                    "mapped", KIB(t.mapped_bytes), KIB(t.peak_mapped_bytes), (unsigned long)t.segments,
                    (unsigned long)t.pooled_chunks, (unsigned long)t.unmapped_segments,
                    (unsigned long)t.large_objects);
    pcm_sink_printf(out, "pcmalloc: %-12s %10lu KiB %10lu KiB   pages written to: the most that can be resident\n",
                    "committed", KIB(t.committed_bytes), KIB(t.peak_committed_bytes));
    pcm_sink_printf(out, "pcmalloc: %-12s %10lu KiB %14s   small objects out of spans (in use or cached)\n",
                    "small live", KIB(pcm_stats_small_live_bytes()), "");
    pcm_sink_printf(out, "pcmalloc: %-12s %10lu KiB %14s   large mappings in use or cached for reuse\n",
                    "large", KIB(t.large_bytes), "");
    pcm_sink_printf(out, "pcmalloc: %-12s %10lu KiB %14s   %lu freed large mappings kept for reuse\n",
                    "large cached", KIB(t.large_cached_bytes), "", (unsigned long)t.large_cached);
}

static void print_classes(struct pcm_sink *out)
{
    pcm_sink_printf(out, "pcmalloc: %12s %12s %12s %12s %12s %12s\n", "class bytes", "requests", "live", "peak",
                    "live KiB", "peak KiB");
    struct pcm_stats_class sum = {0};
    pcm_word_t live_bytes = 0, peak_bytes = 0;
    for (unsigned c = 0; c < PCM_CLASS_COUNT; c++) {
        struct pcm_stats_class row;
        pcm_stats_class_read(c, &row);
        if (!row.requests && !row.peak_spans)
            continue;
        pcm_sink_printf(out, "pcmalloc: %12zu %12lu %12lu %12lu %12lu %12lu\n", row.size,
                        (unsigned long)row.requests, (unsigned long)row.live, (unsigned long)row.peak,
                        KIB(row.live * row.size), KIB(row.peak * row.size));
        sum.requests += row.requests;
        sum.live += row.live;
        sum.peak += row.peak;
        live_bytes += row.live * row.size;
        peak_bytes += row.peak * row.size;
    }
    pcm_sink_printf(out, "pcmalloc: %12s %12lu %12lu %12lu %12lu %12lu\n", "all", (unsigned long)sum.requests,
                    (unsigned long)sum.live, (unsigned long)sum.peak, KIB(live_bytes), KIB(peak_bytes));
}

static void print_heaps(struct pcm_sink *out)
{
    pcm_sink_printf(out, "pcmalloc: %12s %12s %12s %12s %12s %12s %8s %8s\n", "heap (CPU)", "requests",
                    "local frees", "remote frees", "refills", "flushes", "spans+", "spans-");
    for (unsigned h = 0; h < pcm_heap_count; h++) {
        struct pcm_stats_heap row;
        pcm_stats_heap_read(h, &row);
        if (!row.requests && !row.remote_frees)
            continue;
        pcm_sink_printf(out, "pcmalloc: %12u %12lu %12lu %12lu %12lu %12lu %8lu %8lu\n", h,
                        (unsigned long)row.requests, (unsigned long)row.local_frees,
                        (unsigned long)row.remote_frees, (unsigned long)row.refills, (unsigned long)row.flushes,
                        (unsigned long)row.spans_created, (unsigned long)row.spans_released);
    }
}

void pcm_stats_print(void)
{
    int saved_errno = errno;
    struct pcm_sink out;
    pcm_sink_init_fd(&out, pcm_stats_fd);
    print_header(&out);
    print_totals(&out);
    if (pcm_heaps) {
        print_classes(&out);
        print_heaps(&out);
    }
    pcm_sink_printf(&out, "pcmalloc: (counted off the fast path: requests are objects refills handed to the "
                          "per-CPU caches, live is out of spans now, peak is the most the class's spans held "
                          "room for; see pcmalloc(7))\n");
    errno = saved_errno;
}
