/*
 * tests/unit/purge_thread.c - PCMALLOC_PURGE_THREAD=1 (purge_thread.h): a
 * program that frees a phase and then makes no call at all gets its memory
 * back within a few purge delays; without the option the same program
 * keeps it, since decay's ticks run only on its calls - so the test fails
 * if the thread does nothing.  The thread is named pcmalloc-purge, has
 * every signal a program can send blocked, is not there in a fork's child
 * and starts again there at the child's first slow path.
 *
 * Each case runs in a child process of its own (the thread cannot be
 * stopped once started), with the options set in pcm_opts directly before
 * its first allocation, as PCMALLOC_PURGE_THREAD and PCMALLOC_PURGE_DELAY
 * would set them.  Tests link no interposition layer (preload.c), so each
 * child allows the thread itself, as pcmalloc's constructor does, and the
 * fork case calls what preload.c's fork handler calls in the child
 * (tests/drop_in/options.sh runs the real ones, in python3).  The resident
 * set is relative to the child's at its start: under qemu-user the
 * emulator's own memory is part of it.  Under qemu-user /proc shows the
 * emulator's threads' signal masks, not the program's, and a thread made
 * in the child of a multi-threaded process aborts qemu 7.2 (preload/fork.c):
 * the mask and fork cases run only outside qemu-user (natively, and in
 * the whole-machine VMs).
 */
#include "harness.h"

#include "pcmalloc.h"

#include "init.h"
#include "purge_thread.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define PHASE_BYTES (64 * MIB)
#define DELAY_MS 50u
/* Ten delays: a tick gives back everything once a delay has passed with
 * no call of the program's, and the thread wakes every half delay; the
 * rest is room for a loaded machine or an emulator. */
#define WAIT_MS (10 * DELAY_MS)
#define KEPT_AT_MOST (16 * MIB)
#define WATCHDOG_S 60u

/* PHASE_BYTES of small objects of mixed sizes, each written whole, then
 * all freed; false if an allocation failed or an object changed. */
static bool phase(void)
{
    size_t most = PHASE_BYTES / 64;
    unsigned char **objects = pcm_malloc(most * sizeof *objects);
    if (!objects)
        return false;
    size_t count = 0, bytes = 0;
    uint64_t rng = pcm_test_seed() | 1;
    bool intact = true;
    while (bytes < PHASE_BYTES && count < most) {
        size_t size = 64 + (size_t)(pcm_test_rand(&rng) % 961);
        unsigned char *p = pcm_malloc(size);
        if (!p)
            break;
        memset(p, (int)(count & 0xff), size);
        objects[count++] = p;
        bytes += size;
    }
    for (size_t i = 0; i < count; i++) {
        intact &= objects[i][0] == (unsigned char)(i & 0xff);
        pcm_free(objects[i]);
    }
    pcm_free(objects);
    return intact && bytes >= PHASE_BYTES;
}

/* The task ID of this process's thread named pcmalloc-purge, 0 if none. */
static long purge_task(void)
{
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks)
        return 0;
    long found = 0;
    for (struct dirent *e; !found && (e = readdir(tasks));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if (pcm_test_read_file(path, comm, sizeof comm) && strcmp(comm, "pcmalloc-purge\n") == 0)
            found = atol(e->d_name);
    }
    closedir(tasks);
    return found;
}

/* The SigBlk mask of task `tid` in /proc (all ones: unreadable). */
static unsigned long long blocked_mask(long tid)
{
    char path[64], status[4096];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    if (!pcm_test_read_file(path, status, sizeof status))
        return ~0ULL;
    const char *line = strstr(status, "SigBlk:");
    return line ? strtoull(line + 7, NULL, 16) : ~0ULL;
}

static unsigned long long bit(int signal)
{
    return 1ULL << (signal - 1);
}

/* Under qemu-user the process is the emulator's, and /proc says so: its
 * comm is the emulator's name (qemu-i386, qemu-aarch64), its threads'
 * signal masks the emulator's own. */
static bool under_qemu_user(void)
{
    char comm[32];
    return pcm_test_read_file("/proc/self/comm", comm, sizeof comm) && strncmp(comm, "qemu-", 5) == 0;
}

enum { OK = 0, PHASE_FAILED = 2, KEPT = 3, NOT_KEPT = 4, NO_THREAD = 5, A_THREAD = 6, SIGNALS_OPEN = 7,
       THREAD_IN_CHILD = 8, NONE_AFTER_FORK = 9, CHILD_FAILED = 10,
       NOT_NATIVE = 11 /* the case cannot run here (under_qemu_user) */ };

/* Start-up first (it reads the options from the environment), then the
 * options for the case; and the thread allowed, as the constructor would. */
static void start_up(bool purge_thread)
{
    pcm_ensure_init();
    pcm_opts.purge_delay_ms = DELAY_MS;
    pcm_opts.purge_thread = purge_thread;
    pcm_purge_thread_allow();
}

/* A phase, then WAIT_MS without a call: with the thread the memory goes
 * back, without it stays.  "Stays" is against the resident set at the
 * phase's end, not before it: where the phase outlasts many delays (an
 * emulator on a busy machine), the ticks of its own frees give back what
 * it freed first, as they should - under qemu-i386 once more than half of
 * it - and only a thread can give anything back during the wait. */
static int quiet_after_phase(void *with_thread)
{
    start_up(with_thread != NULL);
    size_t before = pcm_test_resident_bytes();
    if (!phase())
        return PHASE_FAILED;
    size_t at_end = pcm_test_resident_bytes();
    pcm_test_sleep_ms(WAIT_MS);
    size_t after = pcm_test_resident_bytes();
    bool running = pcm_purge_thread_running() && purge_task() != 0;
    if (!with_thread)
        return running ? A_THREAD : after + PHASE_BYTES / 4 < at_end ? NOT_KEPT : OK;
    if (!running)
        return NO_THREAD;
    if (after > before + KEPT_AT_MOST) {
        fprintf(stderr, "resident %zu KiB before the phase, %zu KiB %u ms after it\n", before >> 10, after >> 10,
                WAIT_MS);
        return KEPT;
    }
    return OK;
}

static const char *const why[] = {
    [PHASE_FAILED] = "the phase's allocations failed or its objects changed",
    [KEPT] = "the memory stayed resident with the purge thread",
    [NOT_KEPT] = "the memory went back during the wait without the purge thread (the test cannot tell them apart)",
    [NO_THREAD] = "no thread named pcmalloc-purge runs",
    [A_THREAD] = "a purge thread runs without the option",
    [SIGNALS_OPEN] = "the purge thread does not block the program's signals",
    [THREAD_IN_CHILD] = "the fork's child has a purge thread before any call",
    [NONE_AFTER_FORK] = "no purge thread in the fork's child after its first slow path",
    [CHILD_FAILED] = "the fork's child failed",
};

static void expect(int (*child)(void *), void *arg)
{
    struct pcm_test_child c = pcm_test_run_child(child, arg, WATCHDOG_S);
    int status = c.exit_status;
    if (c.ran && !c.signaled && status == NOT_NATIVE) {
        pcm_test_printf("    not under qemu-user: /proc shows the emulator's threads, and a thread made in\n"
                        "    the child of a multi-threaded process aborts qemu 7.2\n");
        return;
    }
    PCM_CHECK(c.ran && !c.signaled && status == OK, "child: %s (signal %d, status %d) %s",
              status > 1 && status <= CHILD_FAILED ? why[status] : "?", c.signal, status, c.text);
}

PCM_TEST(a_quiet_program_gets_its_memory_back_with_the_purge_thread)
{
    static int yes;
    expect(quiet_after_phase, &yes);
}

PCM_TEST(a_quiet_program_keeps_its_memory_without_it)
{
    expect(quiet_after_phase, NULL);
}

/* Outside qemu-user: start-up with the thread asked for, a phase, and
 * the thread's task ID; 0 if any of it failed, *status saying why. */
static long thread_after_phase(int *status)
{
    *status = under_qemu_user() ? NOT_NATIVE : OK;
    if (*status != OK)
        return 0;
    start_up(true);
    if (!phase()) {
        *status = PHASE_FAILED;
        return 0;
    }
    long tid = purge_task();
    *status = tid ? OK : NO_THREAD;
    return tid;
}

static int signals_blocked(void *unused)
{
    (void)unused;
    int status;
    long tid = thread_after_phase(&status);
    if (!tid)
        return status;
    unsigned long long mask = blocked_mask(tid);
    const int program_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGCHLD,
                                   SIGWINCH, SIGPROF, SIGIO, SIGRTMIN, SIGRTMAX};
    for (size_t i = 0; i < sizeof program_signals / sizeof program_signals[0]; i++)
        if (!(mask & bit(program_signals[i]))) {
            fprintf(stderr, "signal %d open in the purge thread (SigBlk %llx)\n", program_signals[i], mask);
            return SIGNALS_OPEN;
        }
    return OK;
}

PCM_TEST(the_purge_thread_blocks_the_programs_signals)
{
    expect(signals_blocked, NULL);
}

/* fork: none in the child until its first slow path, one after it. */
static int forked_child(void)
{
    pcm_purge_thread_forked(); /* (preload.c's fork handler, in the child) */
    if (purge_task() != 0)
        return THREAD_IN_CHILD;
    void *p = pcm_malloc(200000); /* a class of its own: a slow path */
    pcm_free(p);
    for (int i = 0; i < 100 && purge_task() == 0; i++) /* (it names itself once it runs) */
        pcm_test_sleep_ms(10);
    return purge_task() != 0 ? OK : NONE_AFTER_FORK;
}

static int fork_restarts_it(void *unused)
{
    (void)unused;
    int status;
    if (!thread_after_phase(&status))
        return status;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0)
        _exit(forked_child());
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
        return CHILD_FAILED;
    return WEXITSTATUS(status);
}

PCM_TEST(a_forks_child_starts_its_own_purge_thread)
{
    expect(fork_restarts_it, NULL);
}
