/*
 * tests/preload/cxx_operators.c - C++'s operators new and delete, which
 * pcmalloc exports (src/preload_cxx.c; delete: api.c), in a process with
 * pcmalloc preloaded and libstdc++ loaded into the global scope, as in a
 * C++ program:
 *   - every form binds to pcmalloc's definition, and libstdc++'s own is
 *     still there behind it;
 *   - every form of new gives a pcmalloc object, with the alignment asked;
 *   - every form of delete frees (a loop that would leak 80 MB stays
 *     small) and checks as free does (a second delete dies naming the
 *     pointer);
 *   - out of memory, new goes on to libstdc++'s operator: the program's
 *     new handler runs, then std::bad_alloc is thrown (in C uncaught:
 *     std::terminate, watched in a child), and the nothrow forms return
 *     NULL.
 * cxx_operators_plugin.c has libstdc++ in a plugin's local scope instead.
 */
#include "cxx_operators.h"

#include <signal.h>
#include <unistd.h>

/* Each form, as the Itanium C++ ABI names it. */
static const char *const new_names[] = {
    "_Znw" PCM_CXX_SIZE_T, "_Zna" PCM_CXX_SIZE_T,
    "_Znw" PCM_CXX_SIZE_T PCM_CXX_NOTHROW, "_Zna" PCM_CXX_SIZE_T PCM_CXX_NOTHROW,
    "_Znw" PCM_CXX_SIZE_T PCM_CXX_ALIGN, "_Zna" PCM_CXX_SIZE_T PCM_CXX_ALIGN,
    "_Znw" PCM_CXX_SIZE_T PCM_CXX_ALIGN PCM_CXX_NOTHROW, "_Zna" PCM_CXX_SIZE_T PCM_CXX_ALIGN PCM_CXX_NOTHROW,
};
static const char *const delete_names[] = {
    "_ZdlPv", "_ZdaPv",
    "_ZdlPv" PCM_CXX_SIZE_T, "_ZdaPv" PCM_CXX_SIZE_T,
    "_ZdlPv" PCM_CXX_NOTHROW, "_ZdaPv" PCM_CXX_NOTHROW,
    "_ZdlPv" PCM_CXX_ALIGN, "_ZdaPv" PCM_CXX_ALIGN,
    "_ZdlPv" PCM_CXX_SIZE_T PCM_CXX_ALIGN, "_ZdaPv" PCM_CXX_SIZE_T PCM_CXX_ALIGN,
    "_ZdlPv" PCM_CXX_ALIGN PCM_CXX_NOTHROW, "_ZdaPv" PCM_CXX_ALIGN PCM_CXX_NOTHROW,
};
#define COUNT(a) (sizeof(a) / sizeof(a)[0])

/* libstdc++, in the global scope (RTLD_GLOBAL, as a C++ program's
 * DT_NEEDED is), and its std::nothrow; NULL if it cannot be loaded. */
static void *libstdcxx(void)
{
    static void *lib;
    if (!lib)
        lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
    return lib;
}

static const void *nothrow_tag(void)
{
    return libstdcxx() ? dlsym(libstdcxx(), "_ZSt7nothrow") : NULL;
}

/* The operator the program's calls bind to. */
static void *bound(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

PCM_TEST(cxx_every_operator_binds_to_pcmalloc_with_libstdcxx_behind_it)
{
    void *lib = libstdcxx();
    PCM_REQUIRE(lib, "dlopen(libstdc++.so.6): %s", dlerror());
    const char *const *names[] = {new_names, delete_names};
    size_t counts[] = {COUNT(new_names), COUNT(delete_names)};
    for (size_t group = 0; group < 2; group++) {
        for (size_t i = 0; i < counts[group]; i++) {
            const char *name = names[group][i];
            const char *provider = pcm_preload_provider(RTLD_DEFAULT, name);
            PCM_CHECK(pcm_preload_from_pcmalloc(RTLD_DEFAULT, name), "%s binds to %s, not to libpcmalloc", name,
                      provider ? provider : "nothing");
            /* What a failing new goes on to (dlsym on a handle searches
             * that library and its dependencies only). */
            PCM_CHECK(!pcm_preload_from_pcmalloc(lib, name) && dlsym(lib, name) != NULL,
                      "libstdc++'s own %s is not there behind pcmalloc's", name);
        }
    }
}

/* new(size) in form i (0..7), 64-byte alignment for the aligned forms. */
static void *new_in_form(size_t i, size_t size, size_t alignment)
{
    void *sym = bound(new_names[i]);
    if (!sym)
        return NULL;
    switch (i) {
    case 0: case 1: return ((cxx_new_fn)sym)(size);
    case 2: case 3: return ((cxx_new_nothrow_fn)sym)(size, nothrow_tag());
    case 4: case 5: return ((cxx_new_aligned_fn)sym)(size, alignment);
    default: return ((cxx_new_aligned_nothrow_fn)sym)(size, alignment, nothrow_tag());
    }
}

/* delete in form i (0..11), with the size and alignment new was given:
 * every form takes the pointer first, the rest is read or not. */
static void delete_in_form(size_t i, void *p, size_t size, size_t alignment)
{
    void *sym = bound(delete_names[i]);
    switch (i) {
    case 0: case 1: ((void (*)(void *))sym)(p); break;
    case 2: case 3: ((void (*)(void *, size_t))sym)(p, size); break;
    case 4: case 5: ((void (*)(void *, const void *))sym)(p, nothrow_tag()); break;
    case 6: case 7: ((void (*)(void *, size_t))sym)(p, alignment); break;
    case 8: case 9: ((void (*)(void *, size_t, size_t))sym)(p, size, alignment); break;
    default: ((void (*)(void *, size_t, const void *))sym)(p, alignment, nothrow_tag()); break;
    }
}

PCM_TEST(cxx_new_gives_pcmalloc_objects_in_every_form)
{
    PCM_REQUIRE(libstdcxx() && nothrow_tag(), "libstdc++.so.6 or its std::nothrow not found: %s", dlerror());
    static const size_t alignments[] = {16, 64, 256, 4096};
    enum { ROUNDS = 4 };
    unsigned char *made[COUNT(new_names)][ROUNDS];
    for (size_t i = 0; i < COUNT(new_names); i++) {
        for (size_t r = 0; r < ROUNDS; r++) {
            size_t alignment = alignments[r];
            made[i][r] = new_in_form(i, 100, alignment);
            PCM_REQUIRE(made[i][r], "%s(100) returned NULL", new_names[i]);
            memset(made[i][r], (int)(i * ROUNDS + r), 100);
            size_t usable = malloc_usable_size(made[i][r]);
            if (i < 4)
                PCM_CHECK(usable == PCM_PRELOAD_CLASS_OF_100, "%s(100): %zu usable bytes, not pcmalloc's %u",
                          new_names[i], usable, PCM_PRELOAD_CLASS_OF_100);
            else
                PCM_CHECK((uintptr_t)made[i][r] % alignment == 0 && usable >= 100,
                          "%s(100, %zu): %p, %zu usable bytes", new_names[i], alignment, (void *)made[i][r],
                          usable);
        }
    }
    for (size_t i = 0; i < COUNT(new_names); i++) {
        for (size_t r = 0; r < ROUNDS; r++) {
            bool kept = true;
            for (size_t b = 0; b < 100; b++)
                kept &= made[i][r][b] == (unsigned char)(i * ROUNDS + r);
            PCM_CHECK(kept, "the object of %s, round %zu, changed", new_names[i], r);
            free(made[i][r]); /* delete is free: any form would do, the next test tries each */
        }
    }
}

PCM_TEST(cxx_delete_frees_in_every_form)
{
    PCM_REQUIRE(libstdcxx() && nothrow_tag(), "libstdc++.so.6 or its std::nothrow not found: %s", dlerror());
    /* 4 KiB a turn: 20,000 turns a form would leak 80 MB if delete did
     * not free; the same object comes back turn after turn instead. */
    enum { TURNS = 20000, SIZE = 4000 };
    for (size_t d = 0; d < COUNT(delete_names); d++) {
        size_t alignment = d >= 6 ? 256 : 16; /* the aligned deletes get what aligned new gave */
        size_t before = pcm_test_resident_bytes();
        for (unsigned t = 0; t < TURNS; t++) {
            unsigned char *p = new_in_form(d >= 6 ? 4 : 0, SIZE, alignment);
            PCM_REQUIRE(p, "new(%u) failed", (unsigned)SIZE);
            p[0] = p[SIZE - 1] = (unsigned char)t;
            delete_in_form(d, p, SIZE, alignment);
        }
        size_t after = pcm_test_resident_bytes();
        PCM_CHECK(after < before + 16u * 1024 * 1024, "%s: %u turns of new and delete grew the resident set "
                  "from %zu to %zu KiB", delete_names[d], (unsigned)TURNS, before / 1024, after / 1024);
    }
}

/* ---- in children: what must end the process ---- */

static size_t death_form;

static int delete_twice(void *unused)
{
    (void)unused;
    void *p = new_in_form(0, 100, 16);
    if (!p)
        return 3;
    delete_in_form(death_form, p, 100, 16);
    delete_in_form(death_form, p, 100, 16);
    return 0;
}

PCM_TEST(cxx_delete_twice_dies_as_a_double_free)
{
    PCM_REQUIRE(libstdcxx() && nothrow_tag(), "libstdc++.so.6 not found: %s", dlerror());
    for (death_form = 0; death_form < COUNT(delete_names); death_form += 5) {
        struct pcm_test_child out = pcm_test_run_child(delete_twice, NULL, 60);
        PCM_REQUIRE(out.ran, "could not run the child");
        PCM_CHECK(out.signaled && out.signal == SIGABRT && strstr(out.text, "double free of 0x"),
                  "%s twice: the child %s %d; stderr: \"%s\"", delete_names[death_form],
                  out.signaled ? "died of signal" : "exited with status",
                  out.signaled ? out.signal : out.exit_status, out.text);
    }
}

/* The program's new handler: it counts its calls (and in a child, which
 * dies, says so on stderr), and the third time gives up: with no handler
 * left, the runtime throws std::bad_alloc. */
static unsigned handler_calls;
static bool handler_speaks;

static cxx_set_new_handler_fn set_new_handler(void)
{
    return (cxx_set_new_handler_fn)dlsym(libstdcxx(), "_ZSt15set_new_handlerPFvvE");
}

static void give_up_third_time(void)
{
    static const char said[] = "new handler called\n";
    if (handler_speaks && write(STDERR_FILENO, said, sizeof said - 1) < 0)
        _exit(3);
    if (++handler_calls >= 3)
        set_new_handler()(NULL);
}

static int new_too_big(void *unused)
{
    (void)unused;
    if (!set_new_handler())
        return 3;
    handler_calls = 0;
    handler_speaks = true;
    set_new_handler()(give_up_third_time);
    new_in_form(death_form, CXX_TOO_BIG, 64);
    return 0; /* new returned: wrong */
}

static unsigned occurrences(const char *text, const char *what)
{
    unsigned n = 0;
    for (const char *at = strstr(text, what); at; at = strstr(at + 1, what))
        n++;
    return n;
}

PCM_TEST(cxx_new_out_of_memory_runs_the_new_handler_then_throws_bad_alloc)
{
    PCM_REQUIRE(libstdcxx(), "libstdc++.so.6 not found: %s", dlerror());
    static const size_t throwing_forms[] = {0, 1, 4, 5};
    for (size_t f = 0; f < COUNT(throwing_forms); f++) {
        death_form = throwing_forms[f];
        struct pcm_test_child out = pcm_test_run_child(new_too_big, NULL, 60);
        PCM_REQUIRE(out.ran, "could not run the child");
        PCM_CHECK(out.signaled && out.signal == SIGABRT && occurrences(out.text, "new handler called") == 3
                      && strstr(out.text, "std::bad_alloc"),
                  "%s(too big): the child %s %d; stderr: \"%s\"", new_names[death_form],
                  out.signaled ? "died of signal" : "exited with status",
                  out.signaled ? out.signal : out.exit_status, out.text);
    }
}

PCM_TEST(cxx_nothrow_new_out_of_memory_runs_the_new_handler_then_returns_null)
{
    PCM_REQUIRE(libstdcxx() && nothrow_tag() && set_new_handler(), "libstdc++.so.6 or its std::nothrow or "
                "std::set_new_handler not found: %s", dlerror());
    static const size_t nothrow_forms[] = {2, 3, 6, 7};
    for (size_t f = 0; f < COUNT(nothrow_forms); f++) {
        handler_calls = 0;
        set_new_handler()(give_up_third_time);
        PCM_CHECK(new_in_form(nothrow_forms[f], CXX_TOO_BIG, 64) == NULL, "%s(too big) did not return NULL",
                  new_names[nothrow_forms[f]]);
        PCM_CHECK(handler_calls == 3, "%s(too big): the new handler ran %u times, not 3",
                  new_names[nothrow_forms[f]], handler_calls);
        void *p = new_in_form(nothrow_forms[f], 100, 64);
        PCM_CHECK(p != NULL, "%s(100) failed after a failure", new_names[nothrow_forms[f]]);
        free(p);
    }
}
