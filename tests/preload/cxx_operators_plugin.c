/*
 * tests/preload/cxx_operators_plugin.c - pcmalloc's operator new where the
 * C++ runtime is not in the global scope: a C program (this one) whose
 * C++ comes with a plugin dlopen'ed RTLD_LOCAL, libstdc++ itself here.
 * libstdc++'s own calls of operator new still bind to pcmalloc's (the
 * global scope is searched first).  Out of memory, pcmalloc's must find
 * the runtime in its caller's scope, so that libstdc++'s nothrow new
 * returns NULL as it would without pcmalloc, not end the process.  With
 * no C++ runtime anywhere, a failing new ends the process with a message:
 * it must not return NULL to code that cannot expect it.
 *
 * Each case runs in a child that loads what it needs: this process never
 * loads libstdc++ (cxx_operators.c has it in the global scope).  Only
 * the sanitizer builds, whose runtime brings libstdc++, cannot set them
 * up.
 */
#include "cxx_operators.h"

#include <signal.h>

static bool libstdcxx_loaded(void)
{
    void *lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (lib)
        dlclose(lib);
    return lib != NULL;
}

/* The sanitizer builds link libstdc++ in with their runtime: then neither
 * case can be set up, and the test says so (the plain builds run both). */
static bool cannot_set_up(void)
{
    if (!libstdcxx_loaded())
        return false;
    pcm_test_printf("  libstdc++ came with this binary (a sanitizer's runtime needs it): the case cannot be set "
                    "up here\n");
    return true;
}

static int new_without_runtime(void *unused)
{
    (void)unused;
    if (libstdcxx_loaded())
        return 3;
    cxx_new_fn op_new = (cxx_new_fn)dlsym(RTLD_DEFAULT, "_Znw" PCM_CXX_SIZE_T);
    if (!op_new || !pcm_preload_from_pcmalloc(RTLD_DEFAULT, "_Znw" PCM_CXX_SIZE_T))
        return 4;
    op_new(CXX_TOO_BIG);
    return 0; /* returned: wrong */
}

PCM_TEST(cxx_new_failing_with_no_cxx_runtime_dies_saying_so)
{
    if (cannot_set_up())
        return;
    struct pcm_test_child out = pcm_test_run_child(new_without_runtime, NULL, 60);
    PCM_REQUIRE(out.ran, "could not run the child");
    PCM_CHECK(out.signaled && out.signal == SIGABRT
                  && strstr(out.text, "pcmalloc: _Znw" PCM_CXX_SIZE_T ": out of memory, and no C++ runtime"),
              "the child %s %d (3: libstdc++ was loaded, 4: operator new is not pcmalloc's); stderr: \"%s\"",
              out.signaled ? "died of signal" : "exited with status", out.signaled ? out.signal : out.exit_status,
              out.text);
}

/* libstdc++'s nothrow new: in it, ::operator new (pcmalloc's) fails and
 * must go on to libstdc++'s, whose std::bad_alloc the nothrow form
 * catches. */
static int nothrow_new_in_local_runtime(void *unused)
{
    (void)unused;
    if (libstdcxx_loaded())
        return 3;
    void *lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 3;
    cxx_new_nothrow_fn nothrow_new = (cxx_new_nothrow_fn)dlsym(lib, "_Znw" PCM_CXX_SIZE_T PCM_CXX_NOTHROW);
    cxx_new_nothrow_fn nothrow_new_array = (cxx_new_nothrow_fn)dlsym(lib, "_Zna" PCM_CXX_SIZE_T PCM_CXX_NOTHROW);
    const void *tag = dlsym(lib, "_ZSt7nothrow");
    if (!nothrow_new || !nothrow_new_array || !tag)
        return 3;
    if (!pcm_preload_from_pcmalloc(RTLD_DEFAULT, "_Znw" PCM_CXX_SIZE_T))
        return 4; /* not the case under test: libstdc++'s calls would not reach pcmalloc's new */
    if (nothrow_new(CXX_TOO_BIG, tag) != NULL || nothrow_new_array(CXX_TOO_BIG, tag) != NULL)
        return 5;
    void *p = nothrow_new(100, tag);
    if (!p || malloc_usable_size(p) != PCM_PRELOAD_CLASS_OF_100)
        return 6;
    free(p);
    return 0;
}

PCM_TEST(cxx_new_failing_in_a_local_plugin_goes_on_to_its_runtime)
{
    if (cannot_set_up())
        return;
    struct pcm_test_child out = pcm_test_run_child(nothrow_new_in_local_runtime, NULL, 60);
    PCM_REQUIRE(out.ran, "could not run the child");
    PCM_CHECK(!out.signaled && out.exit_status == 0,
              "the child %s %d (3: set-up failed, 4: not the case under test, 5: a nothrow new did not return "
              "NULL, 6: nothrow new(100) is not pcmalloc's); stderr: \"%s\"",
              out.signaled ? "died of signal" : "exited with status", out.signaled ? out.signal : out.exit_status,
              out.text);
}
