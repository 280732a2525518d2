/*
 * tests/preload/preloaded.h - the check every preload program makes first:
 * is it pcmalloc that serves this process's malloc?
 *
 * The programs in tests/preload/ are plain C library programs; the test
 * runner starts them with LD_PRELOAD=build/<ARCH>/libpcmalloc.so.  Run by
 * hand without it, they would test the C library's malloc and pass for
 * nothing, so each includes this header (once: it defines a test) and
 * fails, saying why, unless
 *   - pcm_malloc (exported only by libpcmalloc.so) is in the process,
 *   - malloc, as the dynamic linker resolves it, lives in libpcmalloc.so,
 *   - malloc_usable_size(malloc(100)) is 112, pcmalloc's size class for
 *     100 bytes (glibc says 104 on 64-bit, 108 on 32-bit).
 */
#ifndef PCM_TEST_PRELOADED_H
#define PCM_TEST_PRELOADED_H

#include "harness.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* pcmalloc's class for a 100-byte request (src/sizeclass.c). */
#define PCM_PRELOAD_CLASS_OF_100 112u

/* The file that defines `name` as `scope` (RTLD_DEFAULT: the process's
 * calls) resolves it, or NULL. */
static inline const char *pcm_preload_provider(void *scope, const char *name)
{
    Dl_info info;
    void *sym = dlsym(scope, name);
    return sym && dladdr(sym, &info) ? info.dli_fname : NULL;
}

/* Whether that file is libpcmalloc. */
static inline bool pcm_preload_from_pcmalloc(void *scope, const char *name)
{
    const char *provider = pcm_preload_provider(scope, name);
    return provider && strstr(provider, "libpcmalloc");
}

static inline size_t pcm_preload_usable_of_100(void)
{
    void *p = malloc(100);
    size_t usable = p ? malloc_usable_size(p) : 0;
    free(p);
    return usable;
}

/* True when all three signs of pcmalloc are there. */
static inline bool pcm_preload_active(void)
{
    return dlsym(RTLD_DEFAULT, "pcm_malloc") && pcm_preload_from_pcmalloc(RTLD_DEFAULT, "malloc")
           && pcm_preload_usable_of_100() == PCM_PRELOAD_CLASS_OF_100;
}

PCM_TEST(preload_pcmalloc_serves_malloc)
{
    const char *provider = pcm_preload_provider(RTLD_DEFAULT, "malloc");
    if (!pcm_preload_active())
        pcm_test_printf("  NOT RUNNING ON PCMALLOC: start this program with "
                        "LD_PRELOAD=build/<ARCH>/libpcmalloc.so (as `make test` does);\n"
                        "  without it every other test here checks the C library's malloc instead\n");
    PCM_CHECK(dlsym(RTLD_DEFAULT, "pcm_malloc") != NULL, "pcm_malloc is not in the process: libpcmalloc.so is "
                                                         "not loaded");
    PCM_CHECK(pcm_preload_from_pcmalloc(RTLD_DEFAULT, "malloc"), "malloc comes from %s, not libpcmalloc.so",
              provider ? provider : "(unknown)");
    size_t usable = pcm_preload_usable_of_100();
    PCM_CHECK(usable == PCM_PRELOAD_CLASS_OF_100,
              "malloc_usable_size(malloc(100)) is %zu, not pcmalloc's class size %u", usable,
              PCM_PRELOAD_CLASS_OF_100);
}

#endif
