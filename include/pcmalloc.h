/*
 * pcmalloc.h - the public interface of pcmalloc, a lock-free per-CPU
 * malloc.  Loaded with LD_PRELOAD (or linked with -lpcmalloc) it serves
 * the standard names (malloc, free, ...); these pcm_* names reach it
 * directly from either library, whatever else the process uses.
 * Semantics and errno are glibc's, documented per function below where
 * they are not obvious.
 */
#ifndef PCMALLOC_H
#define PCMALLOC_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCM_API __attribute__((visibility("default")))

/* The major version is the shared library's soname (libpcmalloc.so.1):
 * it changes only when a program built against the old one could break.
 * The Makefile, pkg-config file, wrapper and man page take the version
 * from these lines. */
#define PCMALLOC_VERSION_MAJOR 1
#define PCMALLOC_VERSION_MINOR 0
#define PCMALLOC_VERSION "1.0"

PCM_API void *pcm_malloc(size_t size);
PCM_API void pcm_free(void *p);
/* NULL + ENOMEM if count * size overflows. */
PCM_API void *pcm_calloc(size_t count, size_t size);
/* realloc(NULL, n) is malloc(n); realloc(p, 0) frees p and returns NULL. */
PCM_API void *pcm_realloc(void *p, size_t size);
PCM_API void *pcm_reallocarray(void *p, size_t count, size_t size);
/* alignment rounded up to a power of two, as glibc does. */
PCM_API void *pcm_memalign(size_t alignment, size_t size);
/* EINVAL unless alignment is a power of two multiple of sizeof(void *). */
PCM_API int pcm_posix_memalign(void **out, size_t alignment, size_t size);
/* NULL + EINVAL unless alignment is a power of two (C17, glibc >= 2.38). */
PCM_API void *pcm_aligned_alloc(size_t alignment, size_t size);
PCM_API void *pcm_valloc(size_t size);
PCM_API void *pcm_pvalloc(size_t size);
PCM_API size_t pcm_malloc_usable_size(void *p);
/* C23: size (and alignment) as given when p was allocated; a mismatch
 * that pcmalloc can see aborts with a message. */
PCM_API void pcm_free_sized(void *p, size_t size);
PCM_API void pcm_free_aligned_sized(void *p, size_t alignment, size_t size);
/* Give free memory back to the OS now; 1 if any was released. */
PCM_API int pcm_malloc_trim(size_t pad);
/* The statistics table (as PCMALLOC_STATS=1 prints at exit), on stderr.
 * pcmalloc(7) says what each number means. */
PCM_API void pcm_malloc_stats(void);
/* The same statistics as one JSON object, written into buf[0 .. size-1]
 * and always NUL-terminated when size > 0 (cut if it does not fit).
 * Returns the length of the whole document without the NUL, like
 * snprintf: a result >= size means buf was too small (buf may be NULL
 * when size is 0).  Keys: pcmalloc(7). */
PCM_API size_t pcm_stats_json(char *buf, size_t size);
/* glibc's malloc_info(3): XML on stream; options must be 0 (else -1 and
 * EINVAL).  0 on success, -1 on a write error. */
PCM_API int pcm_malloc_info(int options, FILE *stream);
/* glibc's structs from <malloc.h>: arena = segments, hblkhd = large
 * mappings, uordblks = bytes handed out, fordblks = mapped but free. */
struct mallinfo;
struct mallinfo2;
PCM_API struct mallinfo pcm_mallinfo(void);
PCM_API struct mallinfo2 pcm_mallinfo2(void);
/* Accepted for compatibility; pcmalloc has no glibc tunables. Returns 1. */
PCM_API int pcm_mallopt(int param, int value);

#ifdef __cplusplus
}
#endif

#endif
