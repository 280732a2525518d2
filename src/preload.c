/*
 * preload.c - the interposition layer: the file that exports the standard
 * allocation names, so that LD_PRELOAD=libpcmalloc.so (or linking
 * -lpcmalloc) routes every malloc of the process - libc's, ld.so's after
 * start-up, libstdc++'s operator new - to pcmalloc.  Each is a tail call
 * to its pcm_* twin (bound inside the library by -Bsymbolic-functions);
 * malloc and free, the hottest, are aliases instead, made where their
 * twins are defined (api.c, PCM_STANDARD_NAMES).  Also here: the fork
 * handlers and the report at exit.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

#include "pcmalloc.h"

#include "heap.h"
#include "init.h"
#include "purge_thread.h"
#include "stats.h"

#define PCM_EXPORT __attribute__((visibility("default")))

PCM_EXPORT void *calloc(size_t count, size_t size)
{
    return pcm_calloc(count, size);
}

PCM_EXPORT void *realloc(void *p, size_t size)
{
    return pcm_realloc(p, size);
}

PCM_EXPORT void *reallocarray(void *p, size_t count, size_t size)
{
    return pcm_reallocarray(p, count, size);
}

PCM_EXPORT void *memalign(size_t alignment, size_t size)
{
    return pcm_memalign(alignment, size);
}

PCM_EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
    return pcm_posix_memalign(out, alignment, size);
}

PCM_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
    return pcm_aligned_alloc(alignment, size);
}

PCM_EXPORT void *valloc(size_t size)
{
    return pcm_valloc(size);
}

PCM_EXPORT void *pvalloc(size_t size)
{
    return pcm_pvalloc(size);
}

PCM_EXPORT size_t malloc_usable_size(void *p)
{
    return pcm_malloc_usable_size(p);
}

PCM_EXPORT void free_sized(void *p, size_t size)
{
    pcm_free_sized(p, size);
}

PCM_EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size)
{
    pcm_free_aligned_sized(p, alignment, size);
}

PCM_EXPORT struct mallinfo mallinfo(void)
{
    return pcm_mallinfo();
}

PCM_EXPORT struct mallinfo2 mallinfo2(void)
{
    return pcm_mallinfo2();
}

PCM_EXPORT int malloc_trim(size_t pad)
{
    return pcm_malloc_trim(pad);
}

PCM_EXPORT void malloc_stats(void)
{
    pcm_malloc_stats();
}

PCM_EXPORT int malloc_info(int options, FILE *stream)
{
    return pcm_malloc_info(options, stream);
}

PCM_EXPORT int mallopt(int param, int value)
{
    return pcm_mallopt(param, value);
}

/* glibc exports its allocator under a second set of names, which some
 * programs and libraries call directly; an old binary may still call
 * cfree.  Each is pcmalloc's function here too (tcmalloc and mimalloc
 * do the same): otherwise such a call would hand glibc's allocator
 * pcmalloc's objects, or pcmalloc glibc's.  (__libc_malloc, __libc_free
 * and cfree: api.c.) */
#define ALSO_NAMED(name, function, type, params) \
    PCM_EXPORT type name params __attribute__((alias(#function), copy(function)));
ALSO_NAMED(__libc_calloc, calloc, void *, (size_t count, size_t size))
ALSO_NAMED(__libc_realloc, realloc, void *, (void *p, size_t size))
ALSO_NAMED(__libc_memalign, memalign, void *, (size_t alignment, size_t size))
ALSO_NAMED(__libc_valloc, valloc, void *, (size_t size))
ALSO_NAMED(__libc_pvalloc, pvalloc, void *, (size_t size))
ALSO_NAMED(__libc_mallopt, mallopt, int, (int param, int value))
PCM_EXPORT struct mallinfo __libc_mallinfo(void) /* (an alias would copy glibc's deprecation) */
{
    return pcm_mallinfo();
}

/* fork: the child gets one thread, so a heap lock another thread held at
 * the fork would stay taken forever there; take them all around it. */
static void before_fork(void)
{
    if (pcm_load_acquire(&pcm_init_state) == PCM_INIT_DONE)
        pcm_heaps_lock_all();
}

static void after_fork(void)
{
    if (pcm_load_acquire(&pcm_init_state) == PCM_INIT_DONE)
        pcm_heaps_unlock_all();
}

/* The child has the forking thread alone: no purge thread either. */
static void after_fork_child(void)
{
    after_fork();
    pcm_purge_thread_forked();
}

/* Linked from libpcmalloc.a, this object comes in only for a name the
 * program asks for, and malloc and free live in api.c's: a program that
 * calls malloc and free but not realloc would get glibc's realloc - and
 * its libraries' reallocs of pcmalloc's objects would abort - and no fork
 * handlers.  So api.c's object refers to this symbol, and brings this
 * one with it; this one brings api.c's by its pcm_* calls. */
__attribute__((visibility("hidden"))) const char pcm_preload_linked = 1;

__attribute__((constructor)) static void pcm_preload_start(void)
{
    pcm_ensure_init();
    pthread_atfork(before_fork, after_fork, after_fork_child);
    /* libc is ready (its constructors ran before this one): a thread of
     * pcmalloc's may be made from here on (purge_thread.h). */
    pcm_purge_thread_allow();
}

__attribute__((destructor)) static void pcm_preload_exit(void)
{
    if (pcm_opts.stats == PCM_STATS_JSON)
        pcm_stats_json_print();
    else if (pcm_opts.stats)
        pcm_stats_print();
}
