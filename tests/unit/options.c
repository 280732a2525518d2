/*
 * tests/unit/options.c - PCMALLOC_* parsing and its warnings.
 *
 * Sets variables with setenv and captures the warnings by pointing fd 2
 * at a pipe, so it runs on the libc platform only (not freestanding).
 * Every test unsets what it set: tests must not leak options into others.
 */
#include "harness.h"

#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const all_options[] = {
    "PCMALLOC_STATS", "PCMALLOC_VERBOSE",      "PCMALLOC_RSEQ",
    "PCMALLOC_CPUS",  "PCMALLOC_PURGE_DELAY",  "PCMALLOC_HARDENED", "PCMALLOC_SECURE",
    "PCMALLOC_LARGE_CACHE", "PCMALLOC_LARGE_CACHE_DELAY", "PCMALLOC_HUGEPAGES",
    "PCMALLOC_PURGE_THREAD",
};

/* The hardened build's hardened options default to 1 (options.c). */
#ifdef PCM_HARDENED
#define HARDENED_DEFAULT "1"
#else
#define HARDENED_DEFAULT "0"
#endif

static void clear_options(void)
{
    for (size_t i = 0; i < sizeof all_options / sizeof all_options[0]; i++)
        unsetenv(all_options[i]);
}

/* Load options with fd 2 redirected; what was written lands in out (NUL
 * terminated).  Returns false if the redirection could not be set up. */
static bool load_capturing(struct pcm_options *opts, char *out, size_t cap)
{
    int fds[2];
    out[0] = '\0';
    if (pipe(fds) != 0)
        return false;
    int saved = dup(2);
    if (saved < 0 || dup2(fds[1], 2) < 0) {
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    pcm_options_load(opts);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fds[0], out + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1)
            break;
    }
    out[len] = '\0';
    close(fds[0]);
    return true;
}

static unsigned count_lines(const char *text)
{
    unsigned n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

PCM_TEST(options_defaults)
{
    clear_options();
    struct pcm_options o;
    memset(&o, 0xa5, sizeof o);
    char err[1024];
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    PCM_CHECK(err[0] == '\0', "unexpected output: %s", err);
    PCM_CHECK(o.stats == PCM_STATS_OFF, "stats %d", (int)o.stats);
    PCM_CHECK(!o.verbose, "verbose");
    PCM_CHECK(o.rseq, "rseq off by default");
    PCM_CHECK(o.cpus == 0, "cpus %u", o.cpus);
    PCM_CHECK(o.purge_delay_ms == 1000, "purge delay %u", o.purge_delay_ms);
    PCM_CHECK(o.hardened == (HARDENED_DEFAULT[0] == '1'), "hardened");
    PCM_CHECK(o.secure == (HARDENED_DEFAULT[0] == '1'), "secure");
    PCM_CHECK(o.large_cache_mib == 64, "large cache %u MiB", o.large_cache_mib);
    PCM_CHECK(o.large_cache_delay_ms == 50, "large cache delay %u", o.large_cache_delay_ms);
    PCM_CHECK(!o.hugepages, "hugepages");
}

PCM_TEST(options_valid_values)
{
    clear_options();
    setenv("PCMALLOC_STATS", "1", 1);
    setenv("PCMALLOC_VERBOSE", "1", 1);
    setenv("PCMALLOC_RSEQ", "0", 1);
    setenv("PCMALLOC_CPUS", "1024", 1);
    setenv("PCMALLOC_PURGE_DELAY", "3600000", 1);
    setenv("PCMALLOC_HARDENED", "1", 1);
    setenv("PCMALLOC_LARGE_CACHE", "4095", 1);
    setenv("PCMALLOC_LARGE_CACHE_DELAY", "3600000", 1);
    setenv("PCMALLOC_HUGEPAGES", "1", 1);
    setenv("PCMALLOC_PURGE_THREAD", "1", 1);
    struct pcm_options o;
    char err[1024];
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    PCM_CHECK(err[0] == '\0', "unexpected output: %s", err);
    PCM_CHECK(o.stats == PCM_STATS_TEXT, "stats %d", (int)o.stats);
    PCM_CHECK(o.verbose && !o.rseq && o.hardened, "bools %d %d %d", o.verbose, o.rseq,
              o.hardened);
    PCM_CHECK(o.cpus == 1024, "cpus %u", o.cpus);
    PCM_CHECK(o.purge_delay_ms == 3600000, "purge delay %u", o.purge_delay_ms);
    PCM_CHECK(o.large_cache_mib == 4095, "large cache %u MiB", o.large_cache_mib);
    PCM_CHECK(o.large_cache_delay_ms == 3600000, "large cache delay %u", o.large_cache_delay_ms);
    PCM_CHECK(o.hugepages, "hugepages");
    PCM_CHECK(o.purge_thread, "purge thread");

    setenv("PCMALLOC_STATS", "json", 1);
    setenv("PCMALLOC_CPUS", "0", 1);
    setenv("PCMALLOC_PURGE_DELAY", "0", 1);
    setenv("PCMALLOC_RSEQ", "1", 1);
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    PCM_CHECK(err[0] == '\0', "unexpected output: %s", err);
    PCM_CHECK(o.stats == PCM_STATS_JSON, "stats %d", (int)o.stats);
    PCM_CHECK(o.cpus == 0 && o.purge_delay_ms == 0 && o.rseq, "cpus %u delay %u rseq %d",
              o.cpus, o.purge_delay_ms, o.rseq);

    setenv("PCMALLOC_CPUS", "007", 1); /* leading zeros are still decimal */
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    PCM_CHECK(err[0] == '\0' && o.cpus == 7, "cpus %u, output: %s", o.cpus, err);
    clear_options();
}

static bool same_options(const struct pcm_options *a, const struct pcm_options *b)
{
    return a->stats == b->stats && a->verbose == b->verbose && a->rseq == b->rseq
           && a->cpus == b->cpus && a->purge_delay_ms == b->purge_delay_ms
           && a->hardened == b->hardened && a->large_cache_mib == b->large_cache_mib
           && a->large_cache_delay_ms == b->large_cache_delay_ms && a->hugepages == b->hugepages;
}

/* Set one variable to a bad value; expect its default and exactly one
 * warning line naming the variable, the value and the default. */
static void expect_rejected(const char *name, const char *value, const char *echoed,
                            const char *default_text, const char *reason)
{
    clear_options();
    setenv(name, value, 1);
    struct pcm_options o, defaults;
    char err[1024], none[16];
    errno = 4242;
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    PCM_CHECK(errno == 4242, "%s=%s: errno changed to %d", name, value, errno);
    unsetenv(name);
    PCM_REQUIRE(load_capturing(&defaults, none, sizeof none), "cannot capture stderr");
    PCM_CHECK(same_options(&o, &defaults), "%s=%s: options differ from defaults", name, value);

    char want_value[128], want_default[128];
    size_t n = strlen(name);
    memcpy(want_value, name, n);
    want_value[n] = '=';
    want_value[n + 1] = '"';
    strcpy(want_value + n + 2, echoed);
    strcat(want_value, "\"");
    strcpy(want_default, "using the default ");
    strcat(want_default, default_text);
    PCM_CHECK(strncmp(err, "pcmalloc: ", 10) == 0, "%s=%s: output \"%s\"", name, value, err);
    PCM_CHECK(strstr(err, want_value) != NULL, "%s=%s: \"%s\" lacks %s", name, value, err,
              want_value);
    PCM_CHECK(strstr(err, want_default) != NULL, "%s=%s: \"%s\" lacks %s", name, value, err,
              want_default);
    PCM_CHECK(strstr(err, reason) != NULL, "%s=%s: \"%s\" lacks \"%s\"", name, value, err,
              reason);
    PCM_CHECK(count_lines(err) == 1 && err[strlen(err) - 1] == '\n',
              "%s=%s: not one line: \"%s\"", name, value, err);
}

PCM_TEST(options_malformed_values)
{
    expect_rejected("PCMALLOC_CPUS", "abc", "abc", "0", "not a decimal number");
    expect_rejected("PCMALLOC_CPUS", "8x", "8x", "0", "not a decimal number");
    expect_rejected("PCMALLOC_CPUS", "-1", "-1", "0", "not a decimal number");
    expect_rejected("PCMALLOC_CPUS", "+8", "+8", "0", "not a decimal number");
    expect_rejected("PCMALLOC_CPUS", " 8", " 8", "0", "not a decimal number");
    expect_rejected("PCMALLOC_CPUS", "0x10", "0x10", "0", "not a decimal number");
    expect_rejected("PCMALLOC_CPUS", "", "", "0", "not a decimal number");
    expect_rejected("PCMALLOC_PURGE_DELAY", "1e3", "1e3", "1000", "not a decimal number");
    expect_rejected("PCMALLOC_STATS", "yes", "yes", "0", "is not 0, 1 or json");
    expect_rejected("PCMALLOC_STATS", "JSON", "JSON", "0", "is not 0, 1 or json");
    expect_rejected("PCMALLOC_STATS", "jsonx", "jsonx", "0", "is not 0, 1 or json");
    expect_rejected("PCMALLOC_RSEQ", "true", "true", "1", "is not 0 or 1");
    expect_rejected("PCMALLOC_VERBOSE", "on", "on", "0", "is not 0 or 1");
    expect_rejected("PCMALLOC_HARDENED", "1 ", "1 ", HARDENED_DEFAULT, "is not 0 or 1");
    expect_rejected("PCMALLOC_SECURE", "yes", "yes", HARDENED_DEFAULT, "is not 0 or 1");
    expect_rejected("PCMALLOC_HUGEPAGES", "yes", "yes", "0", "is not 0 or 1");
    expect_rejected("PCMALLOC_PURGE_THREAD", "2", "2", "0", "is not 0 or 1");
    /* A newline in the value must not break the one-line warning. */
    expect_rejected("PCMALLOC_HARDENED", "1\n2", "1?2", HARDENED_DEFAULT, "is not 0 or 1");
}

PCM_TEST(options_out_of_range_values)
{
    expect_rejected("PCMALLOC_CPUS", "1025", "1025", "0", "out of range 0..1024");
    expect_rejected("PCMALLOC_PURGE_DELAY", "3600001", "3600001", "1000",
                    "out of range 0..3600000");
    expect_rejected("PCMALLOC_LARGE_CACHE", "4096", "4096", "64", "out of range 0..4095");
    expect_rejected("PCMALLOC_LARGE_CACHE_DELAY", "3600001", "3600001", "50", "out of range 0..3600000");
    /* Would wrap to a small number in 64-bit arithmetic. */
    expect_rejected("PCMALLOC_CPUS", "18446744073709551617", "18446744073709551617", "0",
                    "out of range");
    expect_rejected("PCMALLOC_VERBOSE", "2", "2", "0", "is not 0 or 1");
    expect_rejected("PCMALLOC_RSEQ", "10", "10", "1", "is not 0 or 1");
    expect_rejected("PCMALLOC_STATS", "2", "2", "0", "is not 0, 1 or json");
}

PCM_TEST(options_long_value_is_cut)
{
    char value[300];
    for (int i = 0; i < 299; i++)
        value[i] = '9';
    value[299] = '\0';
    char echoed[64];
    memset(echoed, '9', 40);
    strcpy(echoed + 40, "...");
    expect_rejected("PCMALLOC_CPUS", value, echoed, "0", "out of range");
}

PCM_TEST(options_several_warnings)
{
    clear_options();
    setenv("PCMALLOC_CPUS", "x", 1);
    setenv("PCMALLOC_PURGE_DELAY", "y", 1);
    setenv("PCMALLOC_HARDENED", "1", 1);
    struct pcm_options o;
    char err[1024];
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    PCM_CHECK(count_lines(err) == 2, "want two warnings: \"%s\"", err);
    PCM_CHECK(o.hardened && o.cpus == 0 && o.purge_delay_ms == 1000,
              "good option lost beside bad ones");
    clear_options();
}

/* ---- pcm_options_format (PCMALLOC_VERBOSE's "options:" line) ---- */

PCM_TEST(options_format_names_every_option_in_force)
{
    clear_options();
    setenv("PCMALLOC_STATS", "json", 1);
    setenv("PCMALLOC_CPUS", "3", 1);
    struct pcm_options o;
    char err[1024];
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    clear_options();
    char text[512];
    memset(text, 'x', sizeof text);
    size_t len = pcm_options_format(&o, text, sizeof text);
    const char *want = "PCMALLOC_STATS=json PCMALLOC_VERBOSE=0 PCMALLOC_RSEQ=1 PCMALLOC_CPUS=3 "
                       "PCMALLOC_PURGE_DELAY=1000 PCMALLOC_HARDENED=" HARDENED_DEFAULT
                       " PCMALLOC_SECURE=" HARDENED_DEFAULT " PCMALLOC_LARGE_CACHE=64 "
                       "PCMALLOC_LARGE_CACHE_DELAY=50 PCMALLOC_HUGEPAGES=0 PCMALLOC_PURGE_THREAD=0";
    PCM_CHECK(strcmp(text, want) == 0, "got \"%s\"", text);
    PCM_CHECK(len == strlen(want), "returned %zu for %zu characters", len, strlen(want));

    /* A short buffer: cut and NUL-terminated, never overrun. */
    char small[20];
    memset(small, 'x', sizeof small);
    len = pcm_options_format(&o, small, 10);
    PCM_CHECK(len == 9 && small[9] == '\0' && strncmp(small, want, 9) == 0 && small[10] == 'x',
              "short buffer: %zu \"%.10s\"", len, small);
}

/* ---- PCMALLOC_* variables that are no option ---- */

PCM_TEST(options_unknown_variable_warned_once)
{
    clear_options();
    setenv("PCMALLOC_STAT", "1", 1);       /* a typo of PCMALLOC_STATS */
    setenv("PCMALLOC_STATSX", "1", 1);     /* a known name is no prefix match */
    setenv("PCMALLOC_LIB", "/x.so", 1);    /* the pcmalloc command's: no warning */
    setenv("XPCMALLOC_STATS", "1", 1);     /* not ours */
    struct pcm_options o;
    char err[1024];
    PCM_REQUIRE(load_capturing(&o, err, sizeof err), "cannot capture stderr");
    unsetenv("PCMALLOC_STAT");
    unsetenv("PCMALLOC_STATSX");
    unsetenv("PCMALLOC_LIB");
    unsetenv("XPCMALLOC_STATS");
    PCM_CHECK(count_lines(err) == 2, "want two warnings: \"%s\"", err);
    PCM_CHECK(strstr(err, "pcmalloc: PCMALLOC_STAT is not a pcmalloc variable; ignored") != NULL, "got \"%s\"", err);
    PCM_CHECK(strstr(err, "pcmalloc: PCMALLOC_STATSX is not a pcmalloc variable; ignored") != NULL, "got \"%s\"",
              err);
    PCM_CHECK(o.stats == PCM_STATS_OFF, "a typo changed PCMALLOC_STATS to %d", (int)o.stats);
}
