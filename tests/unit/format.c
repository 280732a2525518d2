/*
 * tests/unit/format.c - the printf subset of src/format.c.
 *
 * Calls nothing from the C library (string comparisons are written out),
 * so it also runs in the freestanding K6 test program.  Must never depend
 * on the host's printf: the expected strings are spelled out.
 */
#include "harness.h"

#include "format.h"

#include <limits.h>
#include <stdarg.h>

static bool same(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

static size_t length(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

/* Formats and arguments that -Wformat rightly objects to, but whose
 * handling is under test: volatile, so the compiler cannot see them. */
static const char *volatile no_string = 0;
static const char *volatile left_and_zero = "[%-04x]";
static const char *volatile huge_width = "%99999999999999999999d";
static const char *volatile bad_conversion = "a%qb";
static const char *volatile trailing_percent = "ab%";

/* Format into a 128-byte buffer and compare with the expected text and
 * length; the caller's line shows in the failure through the message. */
#define EXPECT(expected, ...)                                                  \
    do {                                                                       \
        char buf_[128];                                                        \
        size_t len_ = pcm_format(buf_, sizeof buf_, __VA_ARGS__);              \
        PCM_CHECK(same(buf_, expected) && len_ == length(expected),            \
                  "got \"%s\" (%zu), want \"%s\"", buf_, len_, expected);      \
    } while (0)

PCM_TEST(format_plain_text)
{
    EXPECT("", "%s", "");
    EXPECT("hello, world", "hello, world");
    EXPECT("100%", "100%%");
    EXPECT("%%", "%%%%");
}

PCM_TEST(format_strings_and_chars)
{
    EXPECT("abc", "%s", "abc");
    EXPECT("(null)", "%s", no_string);
    EXPECT("x=abc;", "x=%s;", "abc");
    EXPECT("a-b", "%c-%c", 'a', 'b');
    EXPECT("[  abc]", "[%5s]", "abc");
    EXPECT("[abc  ]", "[%-5s]", "abc");
    EXPECT("[abcdef]", "[%3s]", "abcdef");
    EXPECT("[    x]", "[%5c]", 'x');
    EXPECT("[x    ]", "[%-5c]", 'x');
    EXPECT("name        |", "%-12s|", "name");
}

PCM_TEST(format_signed)
{
    EXPECT("0", "%d", 0);
    EXPECT("42 -42", "%d %i", 42, -42);
    EXPECT("2147483647", "%d", INT_MAX);
    EXPECT("-2147483648", "%d", INT_MIN);
    EXPECT("-1", "%ld", -1L);
    EXPECT("9223372036854775807", "%lld", LLONG_MAX);
    EXPECT("-9223372036854775808", "%lld", LLONG_MIN);
    EXPECT("-5", "%zd", (ptrdiff_t)-5);
    EXPECT("-7 -7", "%hd %hhd", (short)-7, (signed char)-7);
    EXPECT("[  -42]", "[%5d]", -42);
    EXPECT("[-42  ]", "[%-5d]", -42);
    EXPECT("[-0042]", "[%05d]", -42);
    EXPECT("[00042]", "[%05i]", 42);
    EXPECT("[-42]", "[%2d]", -42);
}

PCM_TEST(format_unsigned)
{
    EXPECT("0", "%u", 0u);
    EXPECT("4294967295", "%u", UINT_MAX);
    EXPECT("4294967295", "%lu", 4294967295UL);
    EXPECT("4294967296", "%llu", 4294967296ULL);
    EXPECT("10000000000", "%llu", 10000000000ULL);
    EXPECT("18446744073709551615", "%llu", ULLONG_MAX);
    EXPECT("12345678901234567890", "%llu", 12345678901234567890ULL);
    EXPECT("10000000000000000000", "%llu", 10000000000000000000ULL);
    EXPECT("1000000000", "%llu", 1000000000ULL);
    EXPECT("4096", "%zu", (size_t)4096);
    EXPECT("[    4096]", "[%8zu]", (size_t)4096);
    EXPECT("[4096    ]", "[%-8zu]", (size_t)4096);
    EXPECT("65535 255", "%hu %hhu", (unsigned short)65535, (unsigned char)255);
}

PCM_TEST(format_hex)
{
    EXPECT("0", "%x", 0u);
    EXPECT("ff", "%x", 255u);
    EXPECT("deadbeef", "%x", 0xdeadbeefu);
    EXPECT("123456789abcdef0", "%llx", 0x123456789abcdef0ULL);
    EXPECT("ffffffffffffffff", "%llx", ULLONG_MAX);
    EXPECT("0000000000001000", "%016lx", 0x1000UL);
    EXPECT("[  1f]", "[%4zx]", (size_t)31);
    EXPECT("[1f  ]", left_and_zero, 31u); /* '-' wins over '0' */
}

PCM_TEST(format_pointer)
{
    EXPECT("0x0", "%p", (void *)0);
    EXPECT("0x1000", "%p", (void *)0x1000);
    EXPECT("[  0x1000]", "[%8p]", (void *)0x1000);
    EXPECT("[0x1000  ]", "[%-8p]", (void *)0x1000);
    char buf[64];
    uintptr_t big = (uintptr_t)-16;
    pcm_format(buf, sizeof buf, "%p", (void *)big);
    PCM_CHECK(same(buf, sizeof(void *) == 8 ? "0xfffffffffffffff0" : "0xfffffff0"),
              "got %s", buf);
}

PCM_TEST(format_width_is_clamped)
{
    /* A huge width must not overflow or run away; output is cut at cap. */
    char buf[16];
    size_t len = pcm_format(buf, sizeof buf, huge_width, 7);
    PCM_CHECK(len == sizeof buf - 1 && buf[len] == '\0', "len %zu", len);
    PCM_CHECK(buf[0] == ' ', "first byte %d", buf[0]);
}


PCM_TEST(format_unsupported_conversions)
{
    char buf[32];
    size_t len = pcm_format(buf, sizeof buf, bad_conversion, 0);
    PCM_CHECK(same(buf, "a?b") && len == 3, "got \"%s\"", buf);
    len = pcm_format(buf, sizeof buf, trailing_percent, 0);
    PCM_CHECK(same(buf, "ab?") && len == 3, "got \"%s\"", buf);
}

PCM_TEST(format_truncates_and_terminates)
{
    char buf[32];
    for (size_t cap = 0; cap <= 20; cap++) {
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = '#';
        size_t len = pcm_format(buf, cap, "hello %d world %s", 12345, "end");
        const char *full = "hello 12345 world end";
        size_t want = cap == 0 ? 0 : cap - 1 < length(full) ? cap - 1 : length(full);
        PCM_CHECK(len == want, "cap %zu: len %zu, want %zu", cap, len, want);
        if (cap > 0)
            PCM_CHECK(buf[len] == '\0', "cap %zu: no NUL at %zu", cap, len);
        for (size_t i = 0; i < len; i++)
            PCM_CHECK(buf[i] == full[i], "cap %zu: byte %zu is %c", cap, i, buf[i]);
        for (size_t i = cap; i < sizeof buf; i++)
            PCM_CHECK(buf[i] == '#', "cap %zu: byte %zu written past cap", cap, i);
    }
    /* cap 0 with no buffer at all is allowed. */
    PCM_CHECK(pcm_format((char *)0, 0, "x%d", 1) == 0, "cap 0 wrote");
}

PCM_TEST(format_truncates_inside_padding_and_numbers)
{
    char buf[6];
    size_t len = pcm_format(buf, sizeof buf, "%20s", "x");
    PCM_CHECK(len == 5 && same(buf, "     "), "got \"%s\"", buf);
    len = pcm_format(buf, sizeof buf, "%-20s|", "abc");
    PCM_CHECK(len == 5 && same(buf, "abc  "), "got \"%s\"", buf);
    len = pcm_format(buf, sizeof buf, "%llu", 18446744073709551615ULL);
    PCM_CHECK(len == 5 && same(buf, "18446"), "got \"%s\"", buf);
    len = pcm_format(buf, sizeof buf, "%08x", 0xabcu);
    PCM_CHECK(len == 5 && same(buf, "00000"), "got \"%s\"", buf);
    len = pcm_format(buf, sizeof buf, "%p", (void *)0xabcdef);
    PCM_CHECK(len == 5 && same(buf, "0xabc"), "got \"%s\"", buf);
}

static size_t via_va_list(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static size_t via_va_list(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len = pcm_format_v(buf, cap, fmt, ap);
    va_end(ap);
    return len;
}

PCM_TEST(format_v_and_chaining)
{
    char buf[64];
    size_t len = via_va_list(buf, sizeof buf, "%s=%u", "n", 7u);
    len += via_va_list(buf + len, sizeof buf - len, ", %s=%d", "m", -1);
    PCM_CHECK(same(buf, "n=7, m=-1") && len == 9, "got \"%s\" (%zu)", buf, len);
    /* A table row, the reason widths exist. */
    len = pcm_format(buf, sizeof buf, "%-8s %8zu %6u%%", "class", (size_t)262144, 95u);
    PCM_CHECK(same(buf, "class      262144     95%"), "got \"%s\"", buf);
}
