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

void pcm_misuse_corrupt_link(const void *obj, const void *link)
{
    pcm_fatal("corrupted free list: the free object %p links to %p, no free object of its heap "
              "(written after free?)", obj, link);
}

void pcm_misuse_handed_out_twice(const void *obj)
{
    pcm_fatal("malloc(): corrupted free list: the object %p is on it but is not free", obj);
}

void pcm_misuse_write_after_free(const void *obj, size_t offset)
{
    pcm_fatal("malloc(): write after free: byte %zu of the free object %p was changed (found when it was "
              "handed out again)", offset, obj);
}

void pcm_misuse_wrong_alignment(const char *call, const void *p, size_t alignment)
{
    pcm_fatal("%s(): alignment %zu does not match the object at %p", call, alignment, p);
}
