/*
 * stats_json.c - the statistics as one JSON object, for tools:
 * pcm_stats_json() into a caller's buffer, PCMALLOC_STATS=json at exit.
 *
 * The same numbers as the table (stats_text.c), unscaled: bytes, not KiB.
 * Only classes and heaps that saw use are listed.  Keys are documented in
 * docs/pcmalloc.7.in; add keys freely, never rename one (tools read them).
 * Never here: malloc, stdio, a lock, or a change of the caller's errno.
 */
#include "stats.h"

#include <errno.h>

#include "atomic.h"
#include "cpu.h"
#include "fast_path.h"
#include "heap.h"
#include "init.h"
#include "pcmalloc.h"
#include "report_sink.h"
#include "sizeclass.h"

static void write_build(struct pcm_sink *out)
{
    pcm_sink_printf(out, "{\"version\": \"%s\", \"arch\": \"%s\", \"atomics\": ", PCMALLOC_VERSION, PCM_ARCH_NAME);
    pcm_sink_json_string(out, pcm_arch_variant_name(pcm_arch_variant_current()));
    pcm_sink_printf(out, ", \"fast_path\": \"%s\", \"fast_path_reason\": ", pcm_fast_path_name());
    pcm_sink_json_string(out, pcm_fast_path_reason());
    pcm_sink_printf(out, ", \"fast_path_restarts\": %lu", (unsigned long)pcm_fast_path_restarts());
    pcm_sink_printf(out, ", \"cpu_source\": ");
    pcm_sink_json_string(out, pcm_cpu_source());
    pcm_sink_printf(out, ", \"heap_count\": %u,\n", pcm_heap_count);
}

static void write_totals(struct pcm_sink *out)
{
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    pcm_sink_printf(out,
                    " \"totals\": {\"mapped_bytes\": %lu, \"mapped_peak_bytes\": %lu, \"committed_bytes\": %lu, "
                    "\"committed_peak_bytes\": %lu,\n",
                    (unsigned long)t.mapped_bytes, (unsigned long)t.peak_mapped_bytes,
                    (unsigned long)t.committed_bytes, (unsigned long)t.peak_committed_bytes);
    pcm_sink_printf(out,
                    "  \"segments\": %lu, \"pooled_chunks\": %lu, \"unmapped_segments\": %lu, \"large_mappings\": %lu, "
                    "\"large_bytes\": %lu, "
                    "\"large_cached_mappings\": %lu, \"large_cached_bytes\": %lu, \"small_live_bytes\": %lu},\n",
                    (unsigned long)t.segments, (unsigned long)t.pooled_chunks, (unsigned long)t.unmapped_segments,
                    (unsigned long)t.large_objects,
                    (unsigned long)t.large_bytes,
                    (unsigned long)t.large_cached, (unsigned long)t.large_cached_bytes,
                    (unsigned long)(pcm_heaps ? pcm_stats_small_live_bytes() : 0));
}

static void write_classes(struct pcm_sink *out)
{
    const char *separator = "\n";
    pcm_sink_printf(out, " \"classes\": [");
    for (unsigned c = 0; pcm_heaps && c < PCM_CLASS_COUNT; c++) {
        struct pcm_stats_class row;
        pcm_stats_class_read(c, &row);
        if (!row.requests && !row.peak_spans)
            continue;
        pcm_sink_printf(out,
                        "%s  {\"size\": %zu, \"requests\": %lu, \"live\": %lu, \"peak\": %lu, \"spans\": %lu, "
                        "\"peak_spans\": %lu}",
                        separator, row.size, (unsigned long)row.requests, (unsigned long)row.live,
                        (unsigned long)row.peak, (unsigned long)row.spans, (unsigned long)row.peak_spans);
        separator = ",\n";
    }
    pcm_sink_printf(out, "],\n");
}

static void write_heaps(struct pcm_sink *out)
{
    const char *separator = "\n";
    pcm_sink_printf(out, " \"heaps\": [");
    for (unsigned h = 0; pcm_heaps && h < pcm_heap_count; h++) {
        struct pcm_stats_heap row;
        pcm_stats_heap_read(h, &row);
        if (!row.requests && !row.remote_frees)
            continue;
        pcm_sink_printf(out,
                        "%s  {\"heap\": %u, \"requests\": %lu, \"local_frees\": %lu, \"remote_frees\": %lu, "
                        "\"refills\": %lu, \"flushes\": %lu, \"spans_created\": %lu, \"spans_released\": %lu}",
                        separator, h, (unsigned long)row.requests, (unsigned long)row.local_frees,
                        (unsigned long)row.remote_frees, (unsigned long)row.refills, (unsigned long)row.flushes,
                        (unsigned long)row.spans_created, (unsigned long)row.spans_released);
        separator = ",\n";
    }
    pcm_sink_printf(out, "]}\n");
}

void pcm_stats_json_write(struct pcm_sink *out)
{
    int saved_errno = errno;
    write_build(out);
    write_totals(out);
    write_classes(out);
    write_heaps(out);
    errno = saved_errno;
}

void pcm_stats_json_print(void)
{
    struct pcm_sink out;
    pcm_sink_init_fd(&out, pcm_stats_fd);
    pcm_stats_json_write(&out);
}

size_t pcm_stats_json(char *buf, size_t size)
{
    pcm_ensure_init();
    struct pcm_sink out;
    pcm_sink_init_buffer(&out, buf, size);
    pcm_stats_json_write(&out);
    return out.total;
}
