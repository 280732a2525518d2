/*
 * format.c - the printf subset of format.h.
 *
 * Must never happen here: a call into the C library (not even memset or
 * strlen: this file links into a freestanding program with no libc), a
 * store at or past buf[cap], or a 64-bit division on a 32-bit target
 * (it would need __udivdi3 from libgcc, which a freestanding link may not
 * have; see pcm_format_decimal).
 */
#include "format.h"

#include <stdbool.h>
#include <stdint.h>

/* Widths beyond this are clamped: no sensible table needs more, and the
 * clamp keeps the digit accumulation from overflowing. */
#define PCM_FORMAT_WIDTH_MAX 4096u

struct pcm_format_sink {
    char *buf;
    size_t cap; /* > 0: one byte is always kept for the NUL */
    size_t len;
};

static bool pcm_format_full(const struct pcm_format_sink *s)
{
    return s->len + 1 >= s->cap;
}

static void pcm_format_put(struct pcm_format_sink *s, char c)
{
    if (!pcm_format_full(s))
        s->buf[s->len++] = c;
}

static void pcm_format_repeat(struct pcm_format_sink *s, char c, size_t count)
{
    for (; count && !pcm_format_full(s); count--)
        s->buf[s->len++] = c;
}

static void pcm_format_bytes(struct pcm_format_sink *s, const char *p, size_t n)
{
    for (; n && !pcm_format_full(s); n--)
        s->buf[s->len++] = *p++;
}

/* A parsed conversion: flags and width. */
struct pcm_format_spec {
    bool left;  /* '-' */
    bool zero;  /* '0' (ignored when left) */
    size_t width;
};

/*
 * Emit prefix (a sign or "0x"), then body, padded to spec->width: spaces
 * before the prefix when right-aligned, zeros between prefix and body with
 * '0', spaces after the body when left-aligned.
 */
static void pcm_format_field(struct pcm_format_sink *s, const struct pcm_format_spec *spec,
                             bool zero_allowed, const char *prefix, size_t prefix_len,
                             const char *body, size_t body_len)
{
    size_t used = prefix_len + body_len;
    size_t pad = spec->width > used ? spec->width - used : 0;
    bool zeros = zero_allowed && spec->zero && !spec->left;
    if (!spec->left && !zeros)
        pcm_format_repeat(s, ' ', pad);
    pcm_format_bytes(s, prefix, prefix_len);
    if (zeros)
        pcm_format_repeat(s, '0', pad);
    pcm_format_bytes(s, body, body_len);
    if (spec->left)
        pcm_format_repeat(s, ' ', pad);
}

/*
 * Decimal digits of v, most significant first, into out (room for 20).
 * Returns the digit count.  Values that fit a native word use the CPU's
 * divide (GCC turns /10 into a multiply).  Wider values - only on 32-bit
 * targets, where unsigned long is 32 bits - are split by subtracting
 * powers of ten, at most 9 times per digit, so no libgcc helper is needed.
 */
static size_t pcm_format_decimal(char *out, unsigned long long v)
{
    size_t n = 0;
    if (v <= (unsigned long)-1) {
        char reversed[20];
        unsigned long w = (unsigned long)v;
        do {
            reversed[n++] = (char)('0' + w % 10);
            w /= 10;
        } while (w);
        for (size_t i = 0; i < n; i++)
            out[i] = reversed[n - 1 - i];
        return n;
    }
    static const unsigned long long powers[20] = {
        1ULL,
        10ULL,
        100ULL,
        1000ULL,
        10000ULL,
        100000ULL,
        1000000ULL,
        10000000ULL,
        100000000ULL,
        1000000000ULL,
        10000000000ULL,
        100000000000ULL,
        1000000000000ULL,
        10000000000000ULL,
        100000000000000ULL,
        1000000000000000ULL,
        10000000000000000ULL,
        100000000000000000ULL,
        1000000000000000000ULL,
        10000000000000000000ULL,
    };
    int top = 19;
    while (powers[top] > v) /* terminates: v > 2^32 here */
        top--;
    for (int i = top; i >= 0; i--) {
        char digit = '0';
        while (v >= powers[i]) {
            v -= powers[i];
            digit++;
        }
        out[n++] = digit;
    }
    return n;
}

/* Lower-case hex digits of v, most significant first (room for 16). */
static size_t pcm_format_hex(char *out, unsigned long long v)
{
    int shift = 0;
    while (shift < 60 && (v >> (shift + 4)) != 0)
        shift += 4;
    size_t n = 0;
    for (; shift >= 0; shift -= 4)
        out[n++] = "0123456789abcdef"[(v >> shift) & 15];
    return n;
}

/* Length modifiers: how wide an integer argument is. */
enum pcm_format_length {
    PCM_FORMAT_INT,
    PCM_FORMAT_CHAR,  /* hh */
    PCM_FORMAT_SHORT, /* h */
    PCM_FORMAT_LONG,  /* l */
    PCM_FORMAT_LLONG, /* ll */
    PCM_FORMAT_SIZE,  /* z */
};

size_t pcm_format_v(char *buf, size_t cap, const char *fmt, va_list ap)
{
    if (cap == 0)
        return 0;
    struct pcm_format_sink s = {buf, cap, 0};
    char digits[24];

    for (; *fmt && !pcm_format_full(&s); fmt++) {
        if (*fmt != '%') {
            pcm_format_put(&s, *fmt);
            continue;
        }
        fmt++;

        struct pcm_format_spec spec = {false, false, 0};
        for (;; fmt++) {
            if (*fmt == '-')
                spec.left = true;
            else if (*fmt == '0')
                spec.zero = true;
            else
                break;
        }
        for (; *fmt >= '0' && *fmt <= '9'; fmt++) {
            if (spec.width < PCM_FORMAT_WIDTH_MAX)
                spec.width = spec.width * 10 + (size_t)(*fmt - '0');
        }
        if (spec.width > PCM_FORMAT_WIDTH_MAX)
            spec.width = PCM_FORMAT_WIDTH_MAX;

        enum pcm_format_length length = PCM_FORMAT_INT;
        if (fmt[0] == 'h' && fmt[1] == 'h') {
            length = PCM_FORMAT_CHAR;
            fmt += 2;
        } else if (fmt[0] == 'h') {
            length = PCM_FORMAT_SHORT;
            fmt++;
        } else if (fmt[0] == 'l' && fmt[1] == 'l') {
            length = PCM_FORMAT_LLONG;
            fmt += 2;
        } else if (fmt[0] == 'l') {
            length = PCM_FORMAT_LONG;
            fmt++;
        } else if (fmt[0] == 'z') {
            length = PCM_FORMAT_SIZE;
            fmt++;
        }

        switch (*fmt) {
        case 'd':
        case 'i': {
            long long v;
            switch (length) {
            case PCM_FORMAT_CHAR: v = (signed char)va_arg(ap, int); break;
            case PCM_FORMAT_SHORT: v = (short)va_arg(ap, int); break;
            case PCM_FORMAT_LONG: v = va_arg(ap, long); break;
            case PCM_FORMAT_LLONG: v = va_arg(ap, long long); break;
            case PCM_FORMAT_SIZE: v = va_arg(ap, ptrdiff_t); break; /* ssize_t's width */
            default: v = va_arg(ap, int); break;
            }
            /* 0 - v in unsigned arithmetic: right even for LLONG_MIN. */
            unsigned long long magnitude = v < 0 ? 0ULL - (unsigned long long)v
                                                 : (unsigned long long)v;
            size_t n = pcm_format_decimal(digits, magnitude);
            pcm_format_field(&s, &spec, true, "-", v < 0 ? 1 : 0, digits, n);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v;
            switch (length) {
            case PCM_FORMAT_CHAR: v = (unsigned char)va_arg(ap, unsigned); break;
            case PCM_FORMAT_SHORT: v = (unsigned short)va_arg(ap, unsigned); break;
            case PCM_FORMAT_LONG: v = va_arg(ap, unsigned long); break;
            case PCM_FORMAT_LLONG: v = va_arg(ap, unsigned long long); break;
            case PCM_FORMAT_SIZE: v = va_arg(ap, size_t); break;
            default: v = va_arg(ap, unsigned); break;
            }
            size_t n = *fmt == 'x' ? pcm_format_hex(digits, v) : pcm_format_decimal(digits, v);
            pcm_format_field(&s, &spec, true, "", 0, digits, n);
            break;
        }
        case 'p': {
            size_t n = pcm_format_hex(digits, (uintptr_t)va_arg(ap, void *));
            pcm_format_field(&s, &spec, true, "0x", 2, digits, n);
            break;
        }
        case 's': {
            const char *str = va_arg(ap, const char *);
            if (!str)
                str = "(null)";
            /* Only the part that can matter is measured: up to the width
             * for padding; the copy itself stops at the NUL or when full. */
            size_t n = 0;
            while (n < spec.width && str[n])
                n++;
            size_t pad = spec.width - n;
            if (!spec.left)
                pcm_format_repeat(&s, ' ', pad);
            while (*str && !pcm_format_full(&s))
                s.buf[s.len++] = *str++;
            if (spec.left)
                pcm_format_repeat(&s, ' ', pad);
            break;
        }
        case 'c': {
            char c = (char)va_arg(ap, int);
            pcm_format_field(&s, &spec, false, "", 0, &c, 1);
            break;
        }
        case '%':
            pcm_format_put(&s, '%');
            break;
        default:
            /* Unsupported: say so in the output rather than guess which
             * argument it meant; a '%' at the very end stops here. */
            pcm_format_put(&s, '?');
            if (!*fmt)
                goto done;
        }
    }
done:
    s.buf[s.len] = '\0';
    return s.len;
}

size_t pcm_format(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len = pcm_format_v(buf, cap, fmt, ap);
    va_end(ap);
    return len;
}
