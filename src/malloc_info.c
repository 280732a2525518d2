/*
 * malloc_info.c - malloc_info(3): the statistics in glibc's XML form, for
 * tools written against glibc's malloc.
 *
 * The one file of the allocator that uses stdio: malloc_info writes to the
 * caller's FILE.  That is safe because it runs only when the program calls
 * it, never inside malloc, and holds no lock of ours while fwrite runs
 * (stdio may call malloc for its buffer: that is an ordinary call into
 * pcmalloc).  Never here: stdio anywhere but the FILE writer below.
 *
 * glibc's elements are kept and filled with pcmalloc's nearest numbers
 * (documented in docs/pcmalloc.7.in):
 *   <heap nr=N>   one per per-CPU heap that has segments; its
 *                 system/aspace sizes are the bytes of its segments;
 *                 <sizes> is empty: pcmalloc keeps no list of free
 *                 chunks by size (free objects sit in spans and caches);
 *   totals        "mmap": large mappings; "rest": mapped bytes not out
 *                 of spans or in large objects (free, in pcmalloc's
 *                 sense), count 0; system "current"/"max": mapped bytes
 *                 now and at peak; aspace "total": mapped, "mprotect":
 *                 committed (pages written to).
 */
#include <errno.h>
#include <stdio.h>

#include "atomic.h"
#include "heap.h"
#include "init.h"
#include "layout.h"
#include "pcmalloc.h"
#include "report_sink.h"
#include "segment.h"
#include "stats.h"

static void write_file(struct pcm_sink *sink, const char *text, size_t len)
{
    fwrite(text, 1, len, (FILE *)sink->writer_data);
}

/* The bytes of heap h's segments, from the count the heap keeps (read
 * without its lock: a moment's figure). */
static unsigned long heap_segment_bytes(unsigned h)
{
    if (!pcm_heap_is_ready(h))
        return 0; /* no segments, and its pages stay untouched */
    return (unsigned long)pcm_load_relaxed(&pcm_heaps[h].segment_count) * PCM_SEGMENT_SIZE;
}

static void write_heaps(struct pcm_sink *out)
{
    for (unsigned h = 0; h < pcm_heap_count; h++) {
        unsigned long bytes = heap_segment_bytes(h);
        if (!bytes)
            continue;
        pcm_sink_printf(out, "<heap nr=\"%u\">\n<sizes>\n</sizes>\n", h);
        pcm_sink_printf(out, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n");
        pcm_sink_printf(out, "<total type=\"rest\" count=\"0\" size=\"0\"/>\n");
        pcm_sink_printf(out, "<system type=\"current\" size=\"%lu\"/>\n<system type=\"max\" size=\"%lu\"/>\n", bytes,
                        bytes);
        pcm_sink_printf(out, "<aspace type=\"total\" size=\"%lu\"/>\n<aspace type=\"mprotect\" size=\"%lu\"/>\n",
                        bytes, bytes);
        pcm_sink_printf(out, "</heap>\n");
    }
}

static void write_totals(struct pcm_sink *out)
{
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    pcm_word_t in_use = pcm_stats_small_live_bytes() + t.large_bytes;
    pcm_word_t free_bytes = t.mapped_bytes > in_use ? t.mapped_bytes - in_use : 0;
    pcm_sink_printf(out, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n");
    pcm_sink_printf(out, "<total type=\"rest\" count=\"0\" size=\"%lu\"/>\n", (unsigned long)free_bytes);
    pcm_sink_printf(out, "<total type=\"mmap\" count=\"%lu\" size=\"%lu\"/>\n", (unsigned long)t.large_objects,
                    (unsigned long)t.large_bytes);
    pcm_sink_printf(out, "<system type=\"current\" size=\"%lu\"/>\n<system type=\"max\" size=\"%lu\"/>\n",
                    (unsigned long)t.mapped_bytes, (unsigned long)t.peak_mapped_bytes);
    pcm_sink_printf(out, "<aspace type=\"total\" size=\"%lu\"/>\n<aspace type=\"mprotect\" size=\"%lu\"/>\n",
                    (unsigned long)t.mapped_bytes, (unsigned long)t.committed_bytes);
}

int pcm_malloc_info(int options, FILE *stream)
{
    /* glibc: options must be zero. */
    if (options != 0 || !stream) {
        errno = EINVAL;
        return -1;
    }
    pcm_ensure_init();
    struct pcm_sink out = {.write = write_file, .fd = -1, .writer_data = stream};
    pcm_sink_printf(&out, "<malloc version=\"1\">\n");
    write_heaps(&out);
    write_totals(&out);
    pcm_sink_printf(&out, "</malloc>\n");
    return ferror(stream) ? -1 : 0;
}
