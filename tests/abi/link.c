/*
 * tests/abi/link.c - a program linked against libpcmalloc the ways users
 * link it: built twice, with libpcmalloc.a (static) and with -lpcmalloc
 * (shared).  Either way the pcm_* API of include/pcmalloc.h must work, and
 * the plain malloc names must reach pcmalloc too.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pcmalloc.h"

PCM_TEST(link_pcm_api_works)
{
    char *p = pcm_malloc(100);
    PCM_REQUIRE(p != NULL, "pcm_malloc(100) failed");
    memset(p, 0x5a, 100);
    PCM_CHECK(pcm_malloc_usable_size(p) == 112, "usable size %zu, pcmalloc's class is 112",
              pcm_malloc_usable_size(p));
    p = pcm_realloc(p, 5000);
    PCM_REQUIRE(p != NULL, "pcm_realloc to 5000 failed");
    PCM_CHECK(p[0] == 0x5a && p[99] == 0x5a, "realloc lost the contents");
    pcm_free(p);
    void *q = NULL;
    PCM_CHECK(pcm_posix_memalign(&q, 4096, 10) == 0 && ((uintptr_t)q & 4095) == 0, "posix_memalign %p", q);
    pcm_free(q);
}

PCM_TEST(link_plain_malloc_is_pcmalloc)
{
    /* 100 bytes is served from the 112-byte class; glibc would say 104 or
     * 120, so this tells the allocators apart. */
    void *p = malloc(100);
    PCM_REQUIRE(p != NULL, "malloc(100) failed");
    PCM_CHECK(malloc_usable_size(p) == 112, "malloc_usable_size(malloc(100)) = %zu: not pcmalloc's malloc",
              malloc_usable_size(p));
    PCM_CHECK(pcm_malloc_usable_size(p) == 112, "pcm_malloc_usable_size of malloc's object");
    pcm_free(p); /* one allocator behind both names: freeing across them is fine */
}
