/*
 * purge_thread.h - PCMALLOC_PURGE_THREAD=1: a thread of pcmalloc's own,
 * "pcmalloc-purge", runs decay's ticks (decay.h) every half purge delay,
 * so that a program that stops calling malloc and free - a server gone
 * quiet after a burst - gets its free memory back as well.  Without it,
 * the ticks run only on the slow paths of the program's own calls.
 *
 * Off by default: decay needs no thread, and a thread in every program
 * would be seen (ps, /proc/PID/task, a debugger) and would turn off glibc's
 * single-threaded shortcuts.  With the option it starts at the first slow
 * path after pcmalloc's constructor (the C library is ready then, and no
 * pcmalloc lock is held there), and again in the child of a fork, where
 * no thread but the forking one lives on.  Its ticks are not the
 * program's calls: they do not end a quiet period (decay.c), so after
 * one they give back all free memory at once, caches of idle CPUs
 * included.  Every signal the program can send is blocked in it.
 */
#ifndef PCM_PURGE_THREAD_H
#define PCM_PURGE_THREAD_H

#include <stdbool.h>

/* pcmalloc's constructor ran: the thread may start from now on. */
void pcm_purge_thread_allow(void);

/* From decay's ticks on the slow paths, no lock held: starts the thread
 * if the option asks for it and none runs.  A load and a compare
 * otherwise. */
void pcm_purge_thread_maybe_start(void);

/* In the child of a fork: the thread did not come along; the next slow
 * path starts one. */
void pcm_purge_thread_forked(void);

/* Whether the thread was started in this process (tests). */
bool pcm_purge_thread_running(void);

#endif
