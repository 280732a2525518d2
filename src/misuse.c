/*
 * misuse.c - the messages of misuse.h, then abort().
 */
#include "misuse.h"

#include "message.h"

void pcm_misuse_invalid_pointer(const char *call, const void *p)
{
    pcm_fatal("%s(): invalid pointer %p", call, p);
}

void pcm_misuse_double_free(const char *call, const void *p)
{
    pcm_fatal("%s(): double free of %p", call, p);
}

void pcm_misuse_wrong_size(const char *call, const void *p, size_t given, size_t usable)
{
    pcm_fatal("%s(): size %zu does not match the object at %p (usable size %zu)", call, given, p, usable);
}

void pcm_misuse_wrong_alignment(const char *call, const void *p, size_t alignment)
{
    pcm_fatal("%s(): alignment %zu does not match the object at %p", call, alignment, p);
}
