/*
 * misuse.h - what pcmalloc says before it aborts on a program's misuse of
 * the API: an invalid pointer, a double free, a wrong size.  Every message
 * names the call and the pointer, on stderr, without malloc or stdio.
 */
#ifndef PCM_MISUSE_H
#define PCM_MISUSE_H

#include <stddef.h>

_Noreturn void pcm_misuse_invalid_pointer(const char *call, const void *p) __attribute__((cold));
_Noreturn void pcm_misuse_double_free(const char *call, const void *p) __attribute__((cold));
_Noreturn void pcm_misuse_wrong_size(const char *call, const void *p, size_t given, size_t usable)
    __attribute__((cold));
_Noreturn void pcm_misuse_wrong_alignment(const char *call, const void *p, size_t alignment)
    __attribute__((cold));

/* The hardened build's (hardening.h): found on a free list, not in a call
 * the program made with the pointer, so they name the object. */
_Noreturn void pcm_misuse_corrupt_link(const void *obj, const void *link) __attribute__((cold));
_Noreturn void pcm_misuse_handed_out_twice(const void *obj) __attribute__((cold));
_Noreturn void pcm_misuse_write_after_free(const void *obj, size_t offset) __attribute__((cold));

#endif
