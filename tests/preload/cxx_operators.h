/*
 * tests/preload/cxx_operators.h - C++'s operators new and delete as a C
 * test calls them: by mangled name, through dlsym, the way a C++
 * program's calls bind.  For cxx_operators.c and cxx_operators_plugin.c.
 */
#ifndef PCM_TEST_CXX_OPERATORS_H
#define PCM_TEST_CXX_OPERATORS_H

#include "preloaded.h"

#include <stdint.h>

/* size_t's code in a mangled name (the Itanium C++ ABI). */
#if SIZE_MAX == 0xffffffffu
#define CXX_SIZE_T "j"
#else
#define CXX_SIZE_T "m"
#endif
#define CXX_NOTHROW "RKSt9nothrow_t"
#define CXX_ALIGN "St11align_val_t"

/* What no allocator can give: new fails at once, without mapping. */
#define CXX_TOO_BIG (SIZE_MAX / 2)

typedef void *(*cxx_new_fn)(size_t);
typedef void *(*cxx_new_nothrow_fn)(size_t, const void *);
typedef void *(*cxx_new_aligned_fn)(size_t, size_t);
typedef void *(*cxx_new_aligned_nothrow_fn)(size_t, size_t, const void *);
typedef void (*cxx_new_handler)(void);
typedef cxx_new_handler (*cxx_set_new_handler_fn)(cxx_new_handler);

/* The file that defines symbol `name` as `scope` resolves it, or NULL. */
static inline const char *cxx_provider(void *scope, const char *name)
{
    Dl_info info;
    void *sym = dlsym(scope, name);
    return sym && dladdr(sym, &info) ? info.dli_fname : NULL;
}

static inline bool cxx_from_pcmalloc(void *scope, const char *name)
{
    const char *provider = cxx_provider(scope, name);
    return provider && strstr(provider, "libpcmalloc");
}

#endif
