/*
 * message.c - pcm_message and pcm_fatal: one line on fd 2 per call.
 *
 * Must never happen here: a call to malloc or stdio (we may be inside
 * malloc, or before libc is initialised), more than one write(2) for a
 * message that the kernel accepts whole, or a change of errno seen by the
 * caller of pcm_message (a warning must not disturb the errno of the
 * malloc call that printed it).
 */
#include "message.h"

#include "format.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

static const char pcm_message_prefix[] = "pcmalloc: ";

/* Write all of buf to fd.  A partial write continues where it stopped,
 * EINTR retries; any other error gives up (stderr is closed or full). */
static void pcm_message_write(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

static void pcm_message_v(int fd, const char *fmt, va_list ap)
{
    char buf[PCM_MESSAGE_MAX];
    size_t len = 0;
    for (const char *p = pcm_message_prefix; *p; p++)
        buf[len++] = *p;

    /* Format with one byte less than the buffer holds: pcm_format_v keeps
     * one for its NUL, and that byte is where the newline goes. */
    size_t room = sizeof buf - 1 - len;
    size_t text = pcm_format_v(buf + len, room, fmt, ap);
    len += text;
    if (text == room - 1) {
        /* Possibly cut: mark it, so a reader does not take a truncated
         * number or name for the whole one. */
        buf[len - 3] = '.';
        buf[len - 2] = '.';
        buf[len - 1] = '.';
    }
    if (buf[len - 1] != '\n')
        buf[len++] = '\n';
    pcm_message_write(fd, buf, len);
}

void pcm_message(const char *fmt, ...)
{
    int saved_errno = errno;
    va_list ap;
    va_start(ap, fmt);
    pcm_message_v(2, fmt, ap);
    va_end(ap);
    errno = saved_errno;
}

void pcm_message_to(int fd, const char *fmt, ...)
{
    int saved_errno = errno;
    va_list ap;
    va_start(ap, fmt);
    pcm_message_v(fd, fmt, ap);
    va_end(ap);
    errno = saved_errno;
}

void pcm_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pcm_message_v(2, fmt, ap);
    va_end(ap);
    abort();
}
