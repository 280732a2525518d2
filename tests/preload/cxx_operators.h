/*
 * tests/preload/cxx_operators.h - C++'s operators new and delete as a C
 * test calls them: by mangled name, through dlsym, the way a C++
 * program's calls bind.  For cxx_operators.c and cxx_operators_plugin.c.
 */
#ifndef PCM_TEST_CXX_OPERATORS_H
#define PCM_TEST_CXX_OPERATORS_H

#include "preloaded.h"

#include <stdint.h>

/* The parts of the mangled names (src/cxx_mangling.h: the test checks
 * that libstdc++ defines each name it makes of them). */
#include "cxx_mangling.h"

/* What no allocator can give: new fails at once, without mapping. */
#define CXX_TOO_BIG (SIZE_MAX / 2)

typedef void *(*cxx_new_fn)(size_t);
typedef void *(*cxx_new_nothrow_fn)(size_t, const void *);
typedef void *(*cxx_new_aligned_fn)(size_t, size_t);
typedef void *(*cxx_new_aligned_nothrow_fn)(size_t, size_t, const void *);
typedef void (*cxx_new_handler)(void);
typedef cxx_new_handler (*cxx_set_new_handler_fn)(cxx_new_handler);

#endif
