/*
 * tests/misuse/death.h - running one misuse in a forked child and judging
 * how it died, for the tests/misuse/ binaries (death.c, death_reuse.c).
 *
 * The child's stderr is a pipe: the parent reads everything the child
 * wrote, waits for it and checks the signal and the message.  The child
 * writes the pointer it is about to misuse into a shared page first
 * (about_to_misuse), so the parent knows which address the message must
 * name.  Core dumps are off in the child (qemu-user would write a core
 * file per case), and alarm() ends a child that hangs instead.  A child
 * that cannot set up the situation it needs exits with SETUP_FAILED.
 *
 * Header only (static functions): each misuse binary is one .c file.
 */
#ifndef PCM_TEST_MISUSE_DEATH_H
#define PCM_TEST_MISUSE_DEATH_H

#include "harness.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* The exit status of a child that could not bring about its case. */
#define SETUP_FAILED 3

/* Seconds a child may take before SIGALRM ends it. */
#define CHILD_WATCHDOG 60u

/* The page shared with the child: the pointer its misuse passes. */
struct shared {
    void *pointer;
};

/* One heap, and this thread on one CPU: a child's objects then come
 * from one heap's spans in a known order (call it before the child's
 * first allocation: PCMALLOC_CPUS is read at pcmalloc's set-up). */
static inline void one_heap(void)
{
    setenv("PCMALLOC_CPUS", "1", 1);
    cpu_set_t set;
    int cpu = sched_getcpu();
    CPU_ZERO(&set);
    CPU_SET(cpu >= 0 ? cpu : 0, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static struct shared *shared_page(void)
{
    static struct shared *page;
    if (!page) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        page = p == MAP_FAILED ? NULL : p;
    }
    return page;
}

/* Called by a misuse just before the call that must die. */
static void *about_to_misuse(void *p)
{
    shared_page()->pointer = p;
    return p;
}

/* misuse() in a child, through pcm_test_run_child. */
struct misuse_call {
    void (*misuse)(void);
};

static int call_misuse(void *arg)
{
    ((struct misuse_call *)arg)->misuse();
    return 0; /* survived */
}

/* Run misuse() in a child with stderr captured. */
static struct pcm_test_child run_in_child(void (*misuse)(void))
{
    struct pcm_test_child out;
    memset(&out, 0, sizeof out);
    if (!shared_page())
        return out;
    shared_page()->pointer = NULL;
    struct misuse_call call = {misuse};
    return pcm_test_run_child(call_misuse, &call, CHILD_WATCHDOG);
}

/* The first line of text, for messages. */
static const char *first_line(const char *text, char *buf, size_t cap)
{
    size_t n = 0;
    while (text[n] && text[n] != '\n' && n + 1 < cap) {
        buf[n] = text[n];
        n++;
    }
    buf[n] = '\0';
    return buf;
}

/* misuse() must die of SIGABRT saying "pcmalloc: <call>(): " ("pcmalloc: "
 * if call is NULL: a fault found on a free list, in no particular call)
 * and, if `what` is not NULL, `what`, and naming the pointer it
 * published. */
static void expect_death(const char *name, void (*misuse)(void), const char *call, const char *what)
{
    struct pcm_test_child out = run_in_child(misuse);
    PCM_REQUIRE(out.ran, "%s: could not run the child", name);
    char line[512];
    first_line(out.text, line, sizeof line);
    PCM_CHECK(out.signaled && out.signal == SIGABRT,
              "%s: the child %s %d instead of dying of SIGABRT; stderr: \"%s\"", name,
              out.signaled ? "died of signal" : "exited with status", out.signaled ? out.signal : out.exit_status,
              line);
    char prefix[64];
    if (call)
        snprintf(prefix, sizeof prefix, "pcmalloc: %s(): ", call);
    else
        snprintf(prefix, sizeof prefix, "pcmalloc: ");
    PCM_CHECK(strncmp(out.text, prefix, strlen(prefix)) == 0, "%s: stderr does not start \"%s\": \"%s\"", name,
              prefix, line);
    void *pointer = shared_page()->pointer;
    char hex[32];
    snprintf(hex, sizeof hex, "%p", pointer);
    PCM_CHECK(pointer && strstr(line, hex), "%s: the message does not name the pointer %s: \"%s\"", name, hex,
              line);
    if (what)
        PCM_CHECK(strstr(line, what), "%s: the message does not say \"%s\": \"%s\"", name, what, line);
    pcm_test_printf("  %s: \"%s\"\n", name, line);
}

/* control() must exit normally with nothing on stderr. */
static void expect_survival(const char *name, void (*control)(void))
{
    struct pcm_test_child out = run_in_child(control);
    PCM_REQUIRE(out.ran, "%s: could not run the child", name);
    char line[512];
    PCM_CHECK(!out.signaled && out.exit_status == 0, "%s: a correct use %s %d; stderr: \"%s\"", name,
              out.signaled ? "died of signal" : "exited with status", out.signaled ? out.signal : out.exit_status,
              first_line(out.text, line, sizeof line));
    PCM_CHECK(out.text[0] == '\0', "%s: a correct use wrote to stderr: \"%s\"", name,
              first_line(out.text, line, sizeof line));
}

#endif
