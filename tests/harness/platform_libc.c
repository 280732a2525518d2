/*
 * platform_libc.c - the harness's platform on the C library: pthreads for
 * workers, mmap for shared memory, write(2) for output.
 */
#include "harness.h"
#include "harness_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

void pcm_test_write(const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(1, buf, len);
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

void *pcm_test_shared_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void pcm_test_shared_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

/* The workers start their work together, once every thread exists: a
 * worker that ran while the others were still being created could use up
 * what their creation needs (a test under an address-space limit filled
 * it before the last stacks were mapped), and an early start would let the
 * first worker run alone for a while, with no one to race. */
struct start_gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    bool open;
};

struct worker {
    void (*fn)(void *, unsigned);
    void *arg;
    unsigned index;
    struct start_gate *gate;
    pthread_t thread;
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    pthread_mutex_lock(&w->gate->lock);
    while (!w->gate->open)
        pthread_cond_wait(&w->gate->opened, &w->gate->lock);
    pthread_mutex_unlock(&w->gate->lock);
    w->fn(w->arg, w->index);
    return NULL;
}

int pcm_test_run_workers(unsigned n, void (*fn)(void *arg, unsigned index), void *arg)
{
    size_t bytes = n * sizeof(struct worker);
    struct worker *w = pcm_test_shared_alloc(bytes);
    if (!w) {
        pcm_test_fail_from_worker(1);
        pcm_test_printf("  cannot map %u worker records\n", n);
        return -1;
    }
    struct start_gate gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
    unsigned started = 0;
    for (; started < n; started++) {
        w[started].fn = fn;
        w[started].arg = arg;
        w[started].index = started;
        w[started].gate = &gate;
        if (pthread_create(&w[started].thread, NULL, worker_main, &w[started]))
            break;
    }
    /* (opened even when a creation failed: those started still run, and
     * are joined, before the failure is reported) */
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.opened);
    pthread_mutex_unlock(&gate.lock);
    for (unsigned i = 0; i < started; i++)
        pthread_join(w[i].thread, NULL);
    pcm_test_shared_free(w, bytes);
    if (started < n) {
        pcm_test_fail_from_worker(1);
        pcm_test_printf("  could start only %u of %u threads\n", started, n);
        return -1;
    }
    return 0;
}

unsigned pcm_test_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

void pcm_test_yield(void)
{
    sched_yield();
}

bool pcm_test_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

void pcm_test_allowed_cpus(int *first, int *last)
{
    cpu_set_t set;
    *first = *last = -1;
    if (sched_getaffinity(0, sizeof set, &set))
        return;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        if (*first < 0)
            *first = cpu;
        *last = cpu;
    }
}

const char *pcm_test_getenv(const char *name)
{
    return getenv(name);
}

uint64_t pcm_test_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pcm_test_exit(int code)
{
    exit(code);
}

int main(void)
{
    return pcm_test_main();
}

struct pcm_test_child pcm_test_run_child(int (*child)(void *arg), void *arg, unsigned watchdog_s)
{
    struct pcm_test_child out;
    memset(&out, 0, sizeof out);
    int fds[2];
    if (pipe(fds))
        return out;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return out;
    }
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        alarm(watchdog_s);
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        _exit(child(arg));
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

size_t pcm_test_read_file(const char *path, char *buf, size_t size)
{
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        for (ssize_t n; len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0;)
            len += (size_t)n;
        close(fd);
    }
    buf[len] = '\0';
    return len;
}

void pcm_test_sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t))
        ;
}

size_t pcm_test_resident_bytes(void)
{
    char text[128];
    if (!pcm_test_read_file("/proc/self/statm", text, sizeof text))
        return 0;
    unsigned long resident = 0;
    const char *p = text;
    while (*p >= '0' && *p <= '9') /* the first field: the size */
        p++;
    while (*p == ' ')
        p++;
    while (*p >= '0' && *p <= '9')
        resident = resident * 10 + (unsigned long)(*p++ - '0');
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

unsigned long pcm_test_parse_hex(const char **p)
{
    unsigned long v = 0;
    for (;; (*p)++) {
        char c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (unsigned long)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (unsigned long)(c - 'a' + 10);
        else
            return v;
    }
}
