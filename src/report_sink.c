/*
 * report_sink.c - the sinks of report_sink.h.  No malloc, no stdio: runs
 * inside the allocator and at exit.  errno is the caller's business (the
 * reports save and restore it around their writes).
 */
#include "report_sink.h"

#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "format.h"

static void write_fd(struct pcm_sink *sink, const char *text, size_t len)
{
    while (len) {
        ssize_t n = write(sink->fd, text, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* closed or full: drop the rest of this piece */
        text += n;
        len -= (size_t)n;
    }
}

/* Append what fits; sink->total (counted by the caller) keeps growing, so
 * a caller whose buffer was short learns the size it needs. */
static void write_buffer(struct pcm_sink *sink, const char *text, size_t len)
{
    if (!sink->cap)
        return;
    size_t used = sink->total < sink->cap - 1 ? sink->total : sink->cap - 1;
    size_t room = sink->cap - 1 - used;
    size_t n = len < room ? len : room;
    for (size_t i = 0; i < n; i++)
        sink->buf[used + i] = text[i];
    sink->buf[used + n] = '\0';
}

void pcm_sink_init_fd(struct pcm_sink *sink, int fd)
{
    *sink = (struct pcm_sink){.write = write_fd, .fd = fd};
}

void pcm_sink_init_buffer(struct pcm_sink *sink, char *buf, size_t cap)
{
    *sink = (struct pcm_sink){.write = write_buffer, .fd = -1, .buf = buf, .cap = cap};
    if (cap)
        buf[0] = '\0';
}

static void emit(struct pcm_sink *sink, const char *text, size_t len)
{
    sink->write(sink, text, len);
    sink->total += len;
}

void pcm_sink_printf(struct pcm_sink *sink, const char *fmt, ...)
{
    char piece[PCM_SINK_PIECE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t len = pcm_format_v(piece, sizeof piece, fmt, ap);
    va_end(ap);
    emit(sink, piece, len);
}

void pcm_sink_json_string(struct pcm_sink *sink, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    emit(sink, "\"", 1);
    for (const char *p = text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            emit(sink, escaped, 2);
        } else if (c < 0x20) {
            char escaped[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            emit(sink, escaped, 6);
        } else {
            emit(sink, (const char *)&c, 1);
        }
    }
    emit(sink, "\"", 1);
}
