/*
 * tests/unit/stats_report.c - the statistics a user reads: the table of
 * pcm_malloc_stats (PCMALLOC_STATS=1), the JSON of pcm_stats_json and the
 * XML of pcm_malloc_info.  Each test allocates objects of a class nothing
 * else in this binary uses and checks that the reports count them: the
 * class's row, the heap rows, the totals, and the report's own shape.
 * Uses the C library (sscanf, dup2, tmpfile): libc platform only.
 */
#include "api_pattern.h"
#include "harness.h"

#include "pcmalloc.h"
#include "sizeclass.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 5000-byte requests land in the 5120-byte class. */
#define REQUEST 5000u
#define CLASS_BYTES 5120u
#define OBJECTS 200u

static void *objects[OBJECTS];

static bool allocate_objects(void)
{
    for (unsigned i = 0; i < OBJECTS; i++) {
        objects[i] = pcm_malloc(REQUEST);
        if (!objects[i])
            return false;
        memset(objects[i], 0x5a, REQUEST);
    }
    return true;
}

static void free_objects(void)
{
    for (unsigned i = 0; i < OBJECTS; i++) {
        pcm_free(objects[i]);
        objects[i] = NULL;
    }
}

static char text[256 * 1024];

/* pcm_malloc_stats with fd 2 on a temporary file; the report lands in
 * text.  False if the capture could not be set up. */
static bool capture_malloc_stats(int *errno_after)
{
    FILE *capture = tmpfile();
    if (!capture)
        return false;
    int saved = dup(2);
    if (saved < 0 || dup2(fileno(capture), 2) != 2) {
        fclose(capture);
        return false;
    }
    errno = 4321;
    pcm_malloc_stats();
    *errno_after = errno;
    dup2(saved, 2);
    close(saved);
    rewind(capture);
    size_t len = fread(text, 1, sizeof text - 1, capture);
    text[len] = '\0';
    fclose(capture);
    return true;
}

/* The line of text whose words after "pcmalloc:" start with `first`. */
static const char *find_row(const char *first)
{
    size_t n = strlen(first);
    for (const char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        const char *p = line;
        if (strncmp(p, "pcmalloc:", 9) != 0)
            continue;
        p += 9;
        while (*p == ' ')
            p++;
        if (strncmp(p, first, n) == 0 && p[n] == ' ')
            return line;
    }
    return NULL;
}

PCM_TEST(stats_table_counts_a_class)
{
    PCM_REQUIRE(allocate_objects(), "malloc(%u) returned NULL", REQUEST);
    int errno_after = 0;
    PCM_REQUIRE(capture_malloc_stats(&errno_after), "cannot capture stderr (errno %d)", errno);
    PCM_CHECK(errno_after == 4321, "malloc_stats changed errno to %d", errno_after);
    PCM_CHECK(strncmp(text, "pcmalloc: statistics of pcmalloc " PCMALLOC_VERSION ": ", 33 + strlen(PCMALLOC_VERSION))
                  == 0,
              "no heading naming the version: %.200s", text);
    PCM_CHECK(strstr(text, "fast path ") != NULL, "the heading does not name the fast path: %.200s", text);

    /* The class row: size, requests, live, peak, live KiB, peak KiB. */
    const char *row = find_row("5120");
    PCM_REQUIRE(row != NULL, "no row for the %u-byte class:\n%s", CLASS_BYTES, text);
    unsigned long size, requests, live, peak, live_kib, peak_kib;
    int fields = sscanf(row, "pcmalloc: %lu %lu %lu %lu %lu %lu", &size, &requests, &live, &peak, &live_kib, &peak_kib);
    PCM_REQUIRE(fields == 6, "class row has %d numbers: %.120s", fields, row);
    PCM_CHECK(requests >= OBJECTS, "%lu requests counted, %u objects allocated", requests, OBJECTS);
    PCM_CHECK(live >= OBJECTS && live <= requests, "%lu live of %lu requests, %u allocated", live, requests, OBJECTS);
    PCM_CHECK(peak >= live, "peak %lu below live %lu", peak, live);
    PCM_CHECK(live_kib == live * CLASS_BYTES / 1024, "live KiB %lu for %lu objects", live_kib, live);
    PCM_CHECK(peak_kib == peak * CLASS_BYTES / 1024, "peak KiB %lu for %lu objects", peak_kib, peak);

    /* The totals: the objects' bytes are mapped, committed and live. */
    unsigned long mapped_now, mapped_peak, committed_now, committed_peak, segments, small_live;
    const char *mapped = find_row("mapped");
    const char *committed = find_row("committed");
    const char *small = find_row("small");
    PCM_REQUIRE(mapped && committed && small, "totals missing:\n%s", text);
    PCM_CHECK(sscanf(mapped, "pcmalloc: mapped %lu KiB %lu KiB %lu segments", &mapped_now, &mapped_peak, &segments)
                  == 3,
              "mapped row: %.120s", mapped);
    PCM_CHECK(sscanf(committed, "pcmalloc: committed %lu KiB %lu KiB", &committed_now, &committed_peak) == 2,
              "committed row: %.120s", committed);
    PCM_CHECK(sscanf(small, "pcmalloc: small live %lu KiB", &small_live) == 1, "small live row: %.120s", small);
    unsigned long need_kib = OBJECTS * CLASS_BYTES / 1024;
    PCM_CHECK(segments >= 1 && mapped_now >= need_kib && mapped_peak >= mapped_now, "mapped %lu/%lu KiB, %lu segments",
              mapped_now, mapped_peak, segments);
    PCM_CHECK(committed_now >= need_kib && committed_peak >= committed_now && committed_now <= mapped_now,
              "committed %lu/%lu KiB (mapped %lu)", committed_now, committed_peak, mapped_now);
    PCM_CHECK(small_live >= need_kib, "small live %lu KiB, %lu allocated", small_live, need_kib);

    /* A heap row: the refills that served the objects. */
    const char *heading = find_row("heap");
    PCM_CHECK(heading && strstr(heading, "local frees") && strstr(heading, "remote frees"),
              "no heap table heading:\n%s", text);
    free_objects();
}

PCM_TEST(stats_json_is_complete_and_snprintf_like)
{
    PCM_REQUIRE(allocate_objects(), "malloc(%u) returned NULL", REQUEST);
    size_t whole = pcm_stats_json(NULL, 0);
    PCM_REQUIRE(whole > 0 && whole < sizeof text, "pcm_stats_json(NULL, 0) = %zu", whole);
    errno = 4321;
    size_t again = pcm_stats_json(text, sizeof text);
    PCM_CHECK(errno == 4321, "pcm_stats_json changed errno to %d", errno);
    /* The objects are still live: the document cannot have shrunk much
     * (a class row may appear between the calls, it cannot vanish). */
    PCM_CHECK(again >= whole - 64 && strlen(text) == again, "lengths %zu, %zu, strlen %zu", whole, again,
              strlen(text));
    PCM_CHECK(text[0] == '{' && again >= 2 && text[again - 2] == '}' && text[again - 1] == '\n',
              "not one object and a newline: %.60s ... %s", text, again > 40 ? text + again - 40 : text);
    int depth = 0, min_depth = 0;
    for (const char *p = text; *p; p++) {
        depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
        if (depth < min_depth)
            min_depth = depth;
    }
    PCM_CHECK(depth == 0 && min_depth == 0, "brackets unbalanced (depth %d, min %d)", depth, min_depth);
    static const char *const keys[] = {"\"version\": \"" PCMALLOC_VERSION "\"", "\"fast_path\": ", "\"totals\": ",
                                       "\"mapped_bytes\": ", "\"committed_peak_bytes\": ", "\"pooled_chunks\": ",
                                       "\"unmapped_segments\": ", "\"classes\": [", "\"heaps\": [",
                                       "\"local_frees\": ", "\"remote_frees\": "};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        PCM_CHECK(strstr(text, keys[i]) != NULL, "no %s in the JSON", keys[i]);
    const char *row = strstr(text, "{\"size\": 5120, ");
    unsigned long requests = 0, live = 0, peak = 0;
    PCM_REQUIRE(row != NULL, "no class 5120 in the JSON:\n%s", text);
    PCM_CHECK(sscanf(row, "{\"size\": 5120, \"requests\": %lu, \"live\": %lu, \"peak\": %lu", &requests, &live, &peak)
                  == 3,
              "class row: %.120s", row);
    PCM_CHECK(requests >= OBJECTS && live >= OBJECTS && peak >= live, "requests %lu live %lu peak %lu", requests,
              live, peak);

    /* Too small a buffer: cut, NUL-terminated, and the full length. */
    char small[16];
    memset(small, 'x', sizeof small);
    size_t cut = pcm_stats_json(small, sizeof small);
    PCM_CHECK(cut >= whole - 64, "short buffer: returned %zu, whole %zu", cut, whole);
    PCM_CHECK(small[15] == '\0' && strncmp(small, text, 15) == 0, "short buffer holds %.16s", small);
    free_objects();
}

/* "spans" and "peak_spans" of a class of one object to a span (heaps count
 * their own, the report sums them): every live object has a span, the
 * peak stays once they are freed, and the spans go with them but for
 * those the caches keep. */
static bool class_spans(size_t size, unsigned long *spans, unsigned long *peak_spans)
{
    char key[64];
    snprintf(key, sizeof key, "{\"size\": %zu, ", size);
    pcm_stats_json(text, sizeof text);
    const char *row = strstr(text, key);
    const char *field = row ? strstr(row, "\"spans\": ") : NULL;
    return field && sscanf(field, "\"spans\": %lu, \"peak_spans\": %lu", spans, peak_spans) == 2;
}

PCM_TEST(stats_count_the_spans_of_a_class)
{
    enum { BIG = 30000, BIG_CLASS = 30720, COUNT = 40 };
    static void *big[COUNT];
    unsigned long spans = 0, peak = 0;
    for (unsigned i = 0; i < COUNT; i++) {
        big[i] = pcm_malloc(BIG);
        PCM_REQUIRE(big[i], "malloc(%u) returned NULL", (unsigned)BIG);
        memset(big[i], 0x33, BIG);
    }
    PCM_REQUIRE(pcm_class_span_objects(pcm_size_class(BIG)) == 1 && pcm_class_size(pcm_size_class(BIG)) == BIG_CLASS,
                "class of %u bytes: %zu bytes, %u objects to a span", (unsigned)BIG,
                pcm_class_size(pcm_size_class(BIG)), pcm_class_span_objects(pcm_size_class(BIG)));
    PCM_REQUIRE(class_spans(BIG_CLASS, &spans, &peak), "no spans of class %u in the JSON:\n%.2000s",
                (unsigned)BIG_CLASS, text);
    /* (a cache of each CPU's heap may hold a few more, carved and not yet handed out) */
    PCM_CHECK(spans >= COUNT && peak >= spans, "%lu spans, peak %lu, with %u objects live", spans, peak,
              (unsigned)COUNT);
    unsigned long live_spans = spans;
    for (unsigned i = 0; i < COUNT; i++)
        pcm_free(big[i]);
    PCM_REQUIRE(class_spans(BIG_CLASS, &spans, &peak), "no spans of class %u after the frees", (unsigned)BIG_CLASS);
    PCM_CHECK(peak >= live_spans, "peak %lu after the frees, %lu spans before", peak, live_spans);
    PCM_CHECK(spans < COUNT, "%lu spans after %u objects were freed: none went back", spans, (unsigned)COUNT);
}

PCM_TEST(malloc_info_writes_glibc_xml)
{
    PCM_REQUIRE(allocate_objects(), "malloc(%u) returned NULL", REQUEST);
    FILE *out = tmpfile();
    PCM_REQUIRE(out != NULL, "tmpfile failed (errno %d)", errno);
    PCM_CHECK(pcm_malloc_info(0, out) == 0, "malloc_info(0, file) failed (errno %d)", errno);
    rewind(out);
    size_t len = fread(text, 1, sizeof text - 1, out);
    text[len] = '\0';
    fclose(out);
    PCM_CHECK(strncmp(text, "<malloc version=\"1\">\n", 21) == 0, "starts with %.40s", text);
    PCM_CHECK(len > 10 && strcmp(text + len - 10, "</malloc>\n") == 0, "does not end with </malloc>: %s",
              len > 40 ? text + len - 40 : text);
    PCM_CHECK(strstr(text, "<heap nr=\"") != NULL, "no <heap> element:\n%s", text);
    unsigned long current = 0;
    const char *system = strstr(text, "</heap>\n<total type=\"fast\"");
    PCM_REQUIRE(system != NULL, "no totals after the heaps:\n%s", text);
    system = strstr(system, "<system type=\"current\" size=\"");
    PCM_CHECK(system && sscanf(system, "<system type=\"current\" size=\"%lu\"", &current) == 1
                  && current >= OBJECTS * CLASS_BYTES,
              "system current %lu, at least %u allocated", current, OBJECTS * CLASS_BYTES);
    errno = 0;
    PCM_CHECK(pcm_malloc_info(1, stdout) == -1 && errno == EINVAL, "options 1 accepted (errno %d)", errno);
    free_objects();
}
