/*
 * options.h - run-time options, read once from PCMALLOC_* variables.
 *
 * The table in options.c is the single source of truth for names,
 * defaults and ranges; the README's option table is copied from it.
 */
#ifndef PCM_OPTIONS_H
#define PCM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

/* PCMALLOC_STATS: what to print at exit.  OFF is 0, so `if (opts.stats)`
 * reads as "statistics wanted". */
enum pcm_stats_mode {
    PCM_STATS_OFF = 0,  /* "0" (default) */
    PCM_STATS_TEXT = 1, /* "1": a human-readable report */
    PCM_STATS_JSON = 2, /* "json": machine-readable (reserved for later) */
};

struct pcm_options {
    enum pcm_stats_mode stats; /* PCMALLOC_STATS: 0, 1 or json */
    bool verbose;              /* PCMALLOC_VERBOSE: 0/1, explain start-up choices */
    bool rseq;                 /* PCMALLOC_RSEQ: 0/1, restartable-sequence fast path */
    unsigned cpus;             /* PCMALLOC_CPUS: per-CPU heaps; 0 = the OS's count */
    unsigned purge_delay_ms;   /* PCMALLOC_PURGE_DELAY: ms before free memory goes back */
    bool hardened;             /* PCMALLOC_HARDENED: 0/1, asks for the hardened build's checks */
    bool secure;               /* PCMALLOC_SECURE: the same (issue 6's name) */
    unsigned large_cache_mib;  /* PCMALLOC_LARGE_CACHE: MiB of freed large mappings kept */
    unsigned large_cache_delay_ms; /* PCMALLOC_LARGE_CACHE_DELAY: ms a cached one waits for reuse */
    bool hugepages;            /* PCMALLOC_HUGEPAGES: 0/1, transparent huge pages for segments */
    bool purge_thread;         /* PCMALLOC_PURGE_THREAD: 0/1, decay's ticks on a thread of their own */
};

/*
 * Fill *out from the environment (pcm_os_getenv, so it works before libc's
 * constructors), defaults for unset variables.  Values are strict: decimal
 * digits only (no sign, spaces or hex), range-checked.  A malformed or
 * out-of-range value gets a one-line warning on stderr naming the
 * variable, the value and the default used instead; never a crash.
 * No allocation; call once at start-up.
 */
void pcm_options_load(struct pcm_options *out);

/*
 * The options in force, as "NAME=value" pairs separated by spaces in the
 * table's order, into buf[0 .. cap-1] (cap > 0; NUL-terminated, cut if
 * short).  Returns the characters stored.  For PCMALLOC_VERBOSE.
 */
size_t pcm_options_format(const struct pcm_options *options, char *buf, size_t cap);

#endif
