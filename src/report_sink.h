/*
 * report_sink.h - where a report (statistics table, JSON, malloc_info's
 * XML) goes: a file descriptor, a caller's buffer, or any writer.
 *
 * Reports are printed from inside the allocator (at exit, from
 * malloc_stats), so a sink formats with format.h into a bounded buffer on
 * the stack and hands each piece to its writer: no malloc, no stdio here.
 * Each pcm_sink_printf is one piece; on a descriptor one piece is one
 * write(2), so a line printed whole does not interleave with other
 * threads' output.  A piece longer than PCM_SINK_PIECE_MAX is cut: keep
 * pieces to a line.
 */
#ifndef PCM_REPORT_SINK_H
#define PCM_REPORT_SINK_H

#include <stddef.h>

#define PCM_SINK_PIECE_MAX 512

struct pcm_sink {
    /* Takes len bytes of text (no NUL). */
    void (*write)(struct pcm_sink *sink, const char *text, size_t len);
    int fd;       /* the descriptor sink's */
    char *buf;    /* the buffer sink's: NUL-terminated, cut at cap - 1 */
    size_t cap;
    void *writer_data; /* for other writers (malloc_info's FILE *) */
    size_t total; /* bytes of the whole report so far, stored or not */
};

/* A sink writing to fd (errors ignored: nowhere to report them). */
void pcm_sink_init_fd(struct pcm_sink *sink, int fd);

/* A sink filling buf[0 .. cap-1], snprintf-style: always NUL-terminated
 * when cap > 0, and sink->total says how long the whole report was. */
void pcm_sink_init_buffer(struct pcm_sink *sink, char *buf, size_t cap);

void pcm_sink_printf(struct pcm_sink *sink, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* text as a JSON string, quotes included (", \ and control bytes escaped). */
void pcm_sink_json_string(struct pcm_sink *sink, const char *text);

#endif
