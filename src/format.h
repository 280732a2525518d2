/*
 * format.h - pcmalloc's printf subset, formatting into a caller's buffer.
 *
 * Used for diagnostics (message.c, statistics) and by the test harness.
 * Nothing here may call the C library: the formatter runs inside malloc and
 * is linked into a freestanding test program that has no libc at all.
 *
 * Supported conversions: %s %c %d %i %u %x %p %%
 *   length modifiers: hh h l ll z (hh/h only so that a caller -Wformat lets
 *                     through is printed correctly, not as garbage)
 *   flags:            '-' left-aligns in the field, '0' pads numbers with
 *                     zeros (after the sign or the "0x" of %p)
 *   field width:      decimal, e.g. %8zu %-12s %016lx (no '*', no precision)
 * %s of NULL prints "(null)"; %p prints "0x" and lower-case hex digits
 * ("0x0" for NULL).  Anything else after '%' prints '?' and consumes no
 * argument.
 */
#ifndef PCM_FORMAT_H
#define PCM_FORMAT_H

#include <stdarg.h>
#include <stddef.h>

/*
 * Format into buf[0 .. cap-1].  When cap > 0 the result is always
 * NUL-terminated, cut at cap - 1 characters if it does not fit.  Returns
 * the number of characters stored, without the NUL (so at most cap - 1;
 * 0 when cap == 0, in which case buf is not touched and may be NULL).
 * Unlike snprintf, the return value is what was written, not what would
 * have been: callers chain pieces with buf + len, cap - len.
 */
size_t pcm_format_v(char *buf, size_t cap, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

size_t pcm_format(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
