/*
 * bench/spawn.c - the runner's launcher: starts one benchmark process,
 * waits for it with wait4 and writes how it ended and its peak RSS to a
 * report file.
 *
 * Why not measure from the runner itself: Linux carries a process's peak
 * RSS across execve, so a child forked from the Python runner starts with
 * the runner's own resident size as its "peak" and every small benchmark
 * would report the runner's 18 MiB. Forked from this small program, the
 * floor is this program's size, below any benchmark's.
 *
 *   spawn REPORT_FILE CPU PROGRAM [ARGUMENTS...]
 * CPU is a CPU number to pin the child to, or - for none. The child gets
 * LD_PRELOAD from BENCH_CHILD_PRELOAD (unset or empty: no preload), so this
 * launcher itself never runs with the allocator under test. The report is
 * one line: "exit N maxrss_kb K wall_s S sleeps W" or "signal N ..." with
 * the same fields; W is the child's voluntary context switches (its threads
 * waiting: on a lock, a condition, a page the kernel had to read).
 * Never allocates after the fork in the child (only async-signal-safe calls
 * between fork and exec).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: spawn REPORT_FILE CPU|- PROGRAM [ARGUMENTS...]\n");
        return 2;
    }
    const char *preload = getenv("BENCH_CHILD_PRELOAD");
    if (preload && *preload)
        setenv("LD_PRELOAD", preload, 1);
    else
        unsetenv("LD_PRELOAD");
    unsetenv("BENCH_CHILD_PRELOAD");

    cpu_set_t pin;
    int pinned = strcmp(argv[2], "-") != 0;
    if (pinned) {
        CPU_ZERO(&pin);
        CPU_SET(atoi(argv[2]), &pin);
    }

    double began = now();
    pid_t child = fork();
    if (child < 0) {
        perror("spawn: fork");
        return 2;
    }
    if (child == 0) {
        if (pinned && sched_setaffinity(0, sizeof pin, &pin) != 0)
            _exit(126);
        execv(argv[3], argv + 3);
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (wait4(child, &status, 0, &usage) < 0) {
        perror("spawn: wait4");
        return 2;
    }
    double wall = now() - began;

    FILE *report = fopen(argv[1], "w");
    if (!report) {
        perror("spawn: report file");
        return 2;
    }
    if (WIFSIGNALED(status))
        fprintf(report, "signal %d", WTERMSIG(status));
    else
        fprintf(report, "exit %d", WEXITSTATUS(status));
    fprintf(report, " maxrss_kb %ld wall_s %.6f sleeps %ld\n", usage.ru_maxrss, wall, usage.ru_nvcsw);
    return fclose(report) == 0 ? 0 : 2;
}
