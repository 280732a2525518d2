/*
 * options.c - parsing PCMALLOC_* environment variables into pcm_options.
 *
 * Must never happen here: a call to malloc or stdio (options are read
 * during the first malloc), a crash or an abort on a bad value (a typo in
 * the environment must not take a program down: warn and use the
 * default), or an option handled outside pcm_option_table.
 */
#include "options.h"

#include "format.h"
#include "message.h"
#include "os.h"

#include <limits.h>
#include <stddef.h>

enum pcm_option_kind {
    PCM_OPTION_BOOL,     /* bool field: 0 or 1 */
    PCM_OPTION_UNSIGNED, /* unsigned field: decimal in [min, max] */
    PCM_OPTION_STATS,    /* enum pcm_stats_mode field: 0, 1 or "json" */
};

struct pcm_option_spec {
    const char *name;
    size_t offset; /* of the field in struct pcm_options */
    enum pcm_option_kind kind;
    unsigned long fallback, min, max; /* fallback: the default */
};

/* offsetof(struct pcm_options, field), but a compile error unless the
 * field has the type the option's kind stores (sizeof of a negative-size
 * array), so a table line cannot write a bool through an unsigned. */
#define PCM_OPTION_FIELD(field, type)                                          \
    (offsetof(struct pcm_options, field)                                       \
     + 0 * sizeof(char[_Generic(((struct pcm_options *)0)->field, type: 1, default: -1)]))

#define PCM_OPTION_BOOL(name, field, fallback) \
    {name, PCM_OPTION_FIELD(field, bool), PCM_OPTION_BOOL, fallback, 0, 1}
#define PCM_OPTION_UNSIGNED(name, field, fallback, min, max) \
    {name, PCM_OPTION_FIELD(field, unsigned), PCM_OPTION_UNSIGNED, fallback, min, max}
#define PCM_OPTION_STATS(name, field, fallback) \
    {name, PCM_OPTION_FIELD(field, enum pcm_stats_mode), PCM_OPTION_STATS, fallback, 0, 1}

/*
 * Every option, one line each: the single source of truth.  The README's
 * option table is written from this one; change both together.
 * (UNSIGNED maxima must fit in unsigned, 32 bits on every target.)
 */
/* The hardened library (hardening.h) always checks: its default says so. */
#ifdef PCM_HARDENED
#define HARDENED_DEFAULT 1
#else
#define HARDENED_DEFAULT 0
#endif

static const struct pcm_option_spec pcm_option_table[] = {
    /*                   variable                 field           default  min  max */
    PCM_OPTION_STATS(   "PCMALLOC_STATS",        stats,          PCM_STATS_OFF),
    PCM_OPTION_BOOL(    "PCMALLOC_VERBOSE",      verbose,        0),
    PCM_OPTION_BOOL(    "PCMALLOC_RSEQ",         rseq,           1),
    PCM_OPTION_UNSIGNED("PCMALLOC_CPUS",         cpus,           0,       0,   1024),
    PCM_OPTION_UNSIGNED("PCMALLOC_PURGE_DELAY",  purge_delay_ms, 1000,    0,   3600000),
    PCM_OPTION_BOOL(    "PCMALLOC_HARDENED",     hardened,       HARDENED_DEFAULT),
    PCM_OPTION_BOOL(    "PCMALLOC_SECURE",       secure,         HARDENED_DEFAULT),
    PCM_OPTION_UNSIGNED("PCMALLOC_LARGE_CACHE",  large_cache_mib, 64,     0,   4095),
    PCM_OPTION_UNSIGNED("PCMALLOC_LARGE_CACHE_DELAY", large_cache_delay_ms, 50, 0, 3600000),
    PCM_OPTION_BOOL(    "PCMALLOC_HUGEPAGES",    hugepages,      0),
    PCM_OPTION_BOOL(    "PCMALLOC_PURGE_THREAD", purge_thread,   0),
};

static void pcm_option_store(struct pcm_options *out, const struct pcm_option_spec *spec,
                             unsigned long value)
{
    void *field = (char *)out + spec->offset;
    switch (spec->kind) {
    case PCM_OPTION_BOOL:
        *(bool *)field = value != 0;
        break;
    case PCM_OPTION_UNSIGNED:
        *(unsigned *)field = (unsigned)value;
        break;
    case PCM_OPTION_STATS:
        *(enum pcm_stats_mode *)field = (enum pcm_stats_mode)value;
        break;
    }
}

enum pcm_option_verdict { PCM_OPTION_OK, PCM_OPTION_MALFORMED, PCM_OPTION_OUT_OF_RANGE };

/* Strict decimal: one or more digits and nothing else. */
static enum pcm_option_verdict pcm_option_parse(const struct pcm_option_spec *spec,
                                                const char *text, unsigned long *value)
{
    if (spec->kind == PCM_OPTION_STATS && text[0] == 'j' && text[1] == 's' && text[2] == 'o'
        && text[3] == 'n' && text[4] == '\0') {
        *value = PCM_STATS_JSON;
        return PCM_OPTION_OK;
    }
    if (*text == '\0')
        return PCM_OPTION_MALFORMED;
    unsigned long v = 0;
    bool too_big = false;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return PCM_OPTION_MALFORMED;
        /* Stop accumulating before v * 10 + 9 could wrap, so that
         * 18446744073709551617 is out of range rather than 1. */
        if (v > (ULONG_MAX - 9) / 10)
            too_big = true;
        else
            v = v * 10 + (unsigned long)(*p - '0');
    }
    if (too_big || v < spec->min || v > spec->max)
        return PCM_OPTION_OUT_OF_RANGE;
    *value = v;
    return PCM_OPTION_OK;
}

/* Longest part of a bad value echoed in a warning. */
#define PCM_OPTION_ECHO_MAX 40

/* text up to its NUL or `stop`, safely for a one-line warning: bounded
 * (cut text ends in "..."), and with control bytes (a newline would break
 * the one-line promise) shown as '?'. */
static void pcm_option_echo(const char *text, char stop, char out[PCM_OPTION_ECHO_MAX + 4])
{
    size_t n = 0;
    for (; text[n] && text[n] != stop && n < PCM_OPTION_ECHO_MAX; n++) {
        unsigned char c = (unsigned char)text[n];
        out[n] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    if (text[n] && text[n] != stop) {
        out[n++] = '.';
        out[n++] = '.';
        out[n++] = '.';
    }
    out[n] = '\0';
}

static void pcm_option_warn(const struct pcm_option_spec *spec, const char *text,
                            enum pcm_option_verdict verdict)
{
    char echo[PCM_OPTION_ECHO_MAX + 4];
    pcm_option_echo(text, '\0', echo);

    switch (spec->kind) {
    case PCM_OPTION_BOOL:
        pcm_message("%s=\"%s\" is not 0 or 1; using the default %lu", spec->name, echo,
                    spec->fallback);
        break;
    case PCM_OPTION_STATS:
        pcm_message("%s=\"%s\" is not 0, 1 or json; using the default %lu", spec->name, echo,
                    spec->fallback);
        break;
    case PCM_OPTION_UNSIGNED:
        if (verdict == PCM_OPTION_MALFORMED)
            pcm_message("%s=\"%s\" is not a decimal number; using the default %lu", spec->name,
                        echo, spec->fallback);
        else
            pcm_message("%s=\"%s\" is out of range %lu..%lu; using the default %lu",
                        spec->name, echo, spec->min, spec->max, spec->fallback);
        break;
    }
}

/* PCMALLOC_* variables that are not options of the library but are
 * expected in a user's environment: the pcmalloc command's. */
static const char *const pcm_option_others[] = {"PCMALLOC_LIB"};

/* True if entry ("NAME=value") names `name` exactly. */
static bool pcm_option_entry_is(const char *entry, const char *name)
{
    while (*name && *entry == *name) {
        entry++;
        name++;
    }
    return *name == '\0' && *entry == '=';
}

/* A PCMALLOC_* variable that is no option is most likely a typo
 * (PCMALLOC_STAT=1): say so, once per variable, rather than let the
 * user wonder why nothing happened. */
static void pcm_options_warn_unknown(void)
{
    static const char prefix[] = "PCMALLOC_";
    size_t count = sizeof pcm_option_table / sizeof pcm_option_table[0];
    size_t others = sizeof pcm_option_others / sizeof pcm_option_others[0];
    for (size_t i = 0;; i++) {
        const char *entry = pcm_os_env_entry(i);
        if (!entry)
            return;
        size_t p = 0;
        while (prefix[p] && entry[p] == prefix[p])
            p++;
        if (prefix[p])
            continue;
        bool known = false;
        for (size_t k = 0; k < count && !known; k++)
            known = pcm_option_entry_is(entry, pcm_option_table[k].name);
        for (size_t k = 0; k < others && !known; k++)
            known = pcm_option_entry_is(entry, pcm_option_others[k]);
        if (!known) {
            char echo[PCM_OPTION_ECHO_MAX + 4];
            pcm_option_echo(entry, '=', echo);
            pcm_message("%s is not a pcmalloc variable; ignored (the variables: man pcmalloc)", echo);
        }
    }
}

void pcm_options_load(struct pcm_options *out)
{
    size_t count = sizeof pcm_option_table / sizeof pcm_option_table[0];
    for (size_t i = 0; i < count; i++) {
        const struct pcm_option_spec *spec = &pcm_option_table[i];
        unsigned long value = spec->fallback;
        const char *text = pcm_os_getenv(spec->name);
        if (text) {
            enum pcm_option_verdict verdict = pcm_option_parse(spec, text, &value);
            if (verdict != PCM_OPTION_OK) {
                pcm_option_warn(spec, text, verdict);
                value = spec->fallback;
            }
        }
        pcm_option_store(out, spec, value);
    }
    pcm_options_warn_unknown();
}

size_t pcm_options_format(const struct pcm_options *options, char *buf, size_t cap)
{
    size_t len = 0;
    size_t count = sizeof pcm_option_table / sizeof pcm_option_table[0];
    for (size_t i = 0; i < count; i++) {
        const struct pcm_option_spec *spec = &pcm_option_table[i];
        const void *field = (const char *)options + spec->offset;
        const char *separator = i ? " " : "";
        switch (spec->kind) {
        case PCM_OPTION_BOOL:
            len += pcm_format(buf + len, cap - len, "%s%s=%d", separator, spec->name, *(const bool *)field);
            break;
        case PCM_OPTION_UNSIGNED:
            len += pcm_format(buf + len, cap - len, "%s%s=%u", separator, spec->name, *(const unsigned *)field);
            break;
        case PCM_OPTION_STATS:
            if (*(const enum pcm_stats_mode *)field == PCM_STATS_JSON)
                len += pcm_format(buf + len, cap - len, "%s%s=json", separator, spec->name);
            else
                len += pcm_format(buf + len, cap - len, "%s%s=%d", separator, spec->name,
                                  (int)*(const enum pcm_stats_mode *)field);
            break;
        }
    }
    return len;
}
