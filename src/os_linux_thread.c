/*
 * os_linux_thread.c - a thread of pcmalloc's own, on pthreads (os.h:
 * pcm_os_start_thread), and a sleep for it.
 *
 * A file apart from os_linux.c, whose calls may run inside malloc before
 * libc is ready: pthread_create allocates the new thread's thread-local
 * storage through malloc - pcmalloc's own - so this is called only with
 * no pcmalloc lock held, after libc's constructors (purge_thread.c).
 */
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct start {
    void (*body)(void);
    char name[16];
};

/* One thread at a time is started (purge_thread.c's state says so), so
 * one static start record serves, and creating it allocates nothing more. */
static struct start pending;

static void *run(void *arg)
{
    struct start *start = arg;
    void (*body)(void) = start->body;
    /* prctl by number: the name is the kernel's, seen in ps and /proc. */
    syscall(SYS_prctl, PR_SET_NAME, (unsigned long)start->name, 0UL, 0UL, 0UL);
    body();
    return NULL;
}

bool pcm_os_start_thread(void (*body)(void), const char *name)
{
    int saved = errno;
    pending.body = body;
    size_t len = 0;
    while (len < sizeof pending.name - 1 && name[len])
        len++;
    memcpy(pending.name, name, len);
    pending.name[len] = '\0';
    /* The new thread inherits the creator's mask: block everything for
     * the creation, and give the creator its mask back.  glibc keeps the
     * signals it uses itself (thread cancellation, setuid's broadcast to
     * every thread) out of any set pthread_sigmask is given, so setuid
     * still reaches this thread. */
    sigset_t all, old;
    memset(&all, 0xff, sizeof all);
    bool started = false;
    if (pthread_sigmask(SIG_SETMASK, &all, &old) == 0) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, run, &pending) == 0) {
            pthread_detach(thread);
            started = true;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    errno = saved;
    return started;
}

void pcm_os_sleep_ms(unsigned long ms)
{
    int saved = errno;
    struct timespec left = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (syscall(SYS_nanosleep, &left, &left) != 0 && errno == EINTR)
        ;
    errno = saved;
}
