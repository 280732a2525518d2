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

struct outcome {
    bool ran;
    bool signaled;
    int signal;
    int exit_status;
    char text[2048];
};

/* Run misuse() in a child with stderr captured. */
static struct outcome run_in_child(void (*misuse)(void))
{
    struct outcome out;
    memset(&out, 0, sizeof out);
    int fds[2];
    if (!shared_page() || pipe(fds))
        return out;
    shared_page()->pointer = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return out;
    }
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        alarm(CHILD_WATCHDOG); /* a hang is a failure too, not a stuck test */
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        misuse();
        _exit(0); /* survived */
    }
    close(fds[1]);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fds[0], out.text + len, sizeof out.text - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof out.text - 1)
            break;
    }
    out.text[len] = '\0';
    close(fds[0]);
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return out;
    out.ran = true;
    out.signaled = WIFSIGNALED(status);
    out.signal = out.signaled ? WTERMSIG(status) : 0;
    out.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
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

/* misuse() must die of SIGABRT saying "pcmalloc: <call>(): " and, if
 * `what` is not NULL, `what`, and naming the pointer it published. */
static void expect_death(const char *name, void (*misuse)(void), const char *call, const char *what)
{
    struct outcome out = run_in_child(misuse);
    PCM_REQUIRE(out.ran, "%s: could not run the child", name);
    char line[512];
    first_line(out.text, line, sizeof line);
    PCM_CHECK(out.signaled && out.signal == SIGABRT,
              "%s: the child %s %d instead of dying of SIGABRT; stderr: \"%s\"", name,
              out.signaled ? "died of signal" : "exited with status", out.signaled ? out.signal : out.exit_status,
              line);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "pcmalloc: %s(): ", call);
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
    struct outcome out = run_in_child(control);
    PCM_REQUIRE(out.ran, "%s: could not run the child", name);
    char line[512];
    PCM_CHECK(!out.signaled && out.exit_status == 0, "%s: a correct use %s %d; stderr: \"%s\"", name,
              out.signaled ? "died of signal" : "exited with status", out.signaled ? out.signal : out.exit_status,
              first_line(out.text, line, sizeof line));
    PCM_CHECK(out.text[0] == '\0', "%s: a correct use wrote to stderr: \"%s\"", name,
              first_line(out.text, line, sizeof line));
}

#endif
