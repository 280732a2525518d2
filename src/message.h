/*
 * message.h - diagnostics on standard error: warnings and fatal errors.
 *
 * Usable from anywhere in the allocator, including inside malloc, before
 * constructors and from ld.so's early calls: these functions never call
 * malloc or stdio, and each message is one write(2) to fd 2, so messages
 * from concurrent threads do not interleave mid-line.
 */
#ifndef PCM_MESSAGE_H
#define PCM_MESSAGE_H

/* Longest message, "pcmalloc: " and the newline included; longer text is
 * cut and ends in "...". */
#define PCM_MESSAGE_MAX 512

/*
 * Write "pcmalloc: " + the formatted text (format.h's printf subset) to
 * fd 2, adding a newline unless the text ends with one.  errno is the same
 * afterwards as before.  Write errors are ignored: there is nowhere else
 * to report them.
 */
void pcm_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The same on another descriptor (the statistics' copy of stderr). */
void pcm_message_to(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* pcm_message, then abort(). */
_Noreturn void pcm_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), cold));

#endif
