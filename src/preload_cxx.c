/*
 * preload_cxx.c - C++'s operator new in every form (plain and array,
 * nothrow, over-aligned), exported beside malloc, so that a C++ program's
 * allocation reaches pcmalloc in one call instead of through libstdc++'s
 * operator, its PLT jump and malloc.  operator delete, in every form, is
 * free itself (aliases in api.c).
 *
 * Running out of memory is the C++ runtime's business: the new-handler
 * loop and std::bad_alloc are C++, and C cannot throw.  So when pcmalloc
 * has no memory, the call goes on, arguments unchanged, to the C++
 * runtime's own operator of the same name (the next definition after
 * this library's).  That one calls malloc (pcmalloc's) again, runs the
 * program's new handler, and throws or returns NULL exactly as it would
 * without pcmalloc.  The exception may pass through this file's frames:
 * it is built with unwind tables (-fexceptions, Makefile).
 *
 * A fully static program (libpcmalloc.a, -static) has no dynamic symbols
 * to find that operator by; there the loop runs here, with libstdc++'s
 * std::get_new_handler and std::__throw_bad_alloc if the program linked
 * them (weak references: static_runtime_new below).
 *
 * Only in the shared library and libpcmalloc.a, like preload.c: the tests
 * link the allocator without it.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

#include "pcmalloc.h"

#include "cxx_mangling.h"
#include "malloc_fast.h"
#include "message.h"

#define PCM_EXPORT __attribute__((visibility("default")))

/* operator new(size_t) and operator new[](size_t); the other forms add
 * their parameters' codes. */
#define NEW "_Znw" PCM_CXX_SIZE_T
#define NEW_ARRAY "_Zna" PCM_CXX_SIZE_T
#define NOTHROW PCM_CXX_NOTHROW
#define ALIGN PCM_CXX_ALIGN

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_aligned_fn)(size_t, size_t);
typedef void *(*new_aligned_nothrow_fn)(size_t, size_t, const void *);

/* libstdc++'s std::get_new_handler() and std::__throw_bad_alloc(), weak:
 * never pulled in by this library, so a C program links libpcmalloc.a
 * without libstdc++; a static C++ program that linked them has them. */
typedef void (*new_handler_fn)(void);
extern new_handler_fn cxx_get_new_handler(void) __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
extern void cxx_throw_bad_alloc(void) __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak, noreturn));

/* What libstdc++'s operator does after malloc failed, for a program whose
 * runtime cannot be looked up (fully static): run the new handler and try
 * again while there is one, then throw std::bad_alloc - or, for the
 * nothrow forms, return NULL at once.  Their handler is not run: if it
 * threw, C could not catch the exception, and it would leave a noexcept
 * operator.  The handler is found if the program linked
 * std::get_new_handler, which it did if it ever set one (the same object
 * of libstdc++.a defines set_new_handler); std::bad_alloc is thrown if it
 * linked __throw_bad_alloc, which std::vector and std::string bring
 * (their __throw_length_error is its neighbour), and without it the
 * process ends with a message. */
static void *static_runtime_new(const char *name, size_t size, size_t alignment, bool nothrow)
{
    if (nothrow)
        return NULL;
    for (;;) {
        new_handler_fn handler = cxx_get_new_handler ? cxx_get_new_handler() : NULL;
        if (!handler)
            break;
        handler();
        void *p = alignment ? pcm_memalign(alignment, size) : pcm_malloc(size);
        if (p)
            return p;
    }
    if (cxx_throw_bad_alloc)
        cxx_throw_bad_alloc();
    pcm_fatal("%s: out of memory, and no C++ runtime found to report it (std::bad_alloc)", name);
}

/* The C++ runtime's definition of `name`, which `self` (this library's)
 * hides, or NULL if there is none to be found.  The global scope has it
 * after this library when the program is C++; a C program's C++ plugin,
 * dlopen'ed with RTLD_LOCAL, has it in its own scope only, so that of the
 * caller comes next. */
static void *next_operator(const char *name, const void *self, const void *caller)
{
    void *next = dlsym(RTLD_NEXT, name);
    if (next && next != self)
        return next;
    Dl_info where;
    if (dladdr(caller, &where) && where.dli_fname) {
        void *scope = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (scope) {
            next = dlsym(scope, name);
            dlclose(scope); /* (NOLOAD counted one more reference) */
            if (next && next != self)
                return next;
        }
    }
    return NULL;
}

/* An operator's allocation, `allocation`, and on failure the runtime's
 * operator of the same name, with the same arguments (or, with no runtime
 * to be found, static_runtime_new for it: `alignment` 0 for the forms
 * without one).  `fn` is the operator; the body runs with the operator's
 * return address (next_operator looks in the caller's scope). */
#define NEW_BODY(fn, name, fn_type, allocation, args, alignment, nothrow)                             \
    {                                                                                                  \
        void *p = allocation;                                                                          \
        if (__builtin_expect(p != NULL, 1))                                                            \
            return p;                                                                                  \
        fn_type next = (fn_type)next_operator(name, (const void *)fn, __builtin_return_address(0));    \
        return next ? next args : static_runtime_new(name, size, alignment, nothrow);                  \
    }

/* An aligned form: NEW_BODY, in the operator itself. */
#define DEFINE_NEW(fn, name, fn_type, allocation, params, args, alignment, nothrow) \
    PCM_EXPORT void *fn params __asm__(name);                                       \
    void *fn params NEW_BODY(fn, name, fn_type, allocation, args, alignment, nothrow)

/* A form without an alignment: malloc's rseq fast path inline
 * (PCM_MALLOC_RSEQ_ONLY), else the slow half, pcm_##fn##_slow: NEW_BODY
 * around pcmalloc's whole malloc.  After a restarted section,
 * pcm_##fn##_restarted counts the restart on the way to the slow half.
 *
 * Every step is a tail call, so that the slow half and the runtime's
 * operator run with the operator's own return address: the slow half
 * reads it for next_operator's scope, and if the runtime's operator calls
 * ::operator new in turn (libstdc++'s array and nothrow forms do, some by
 * a tail call of their own), that call's return address is still in the
 * caller's code.  The halves have the same parameters and the C calling
 * convention (they are not static: on i386 the compiler gave a static one
 * its own register convention, and then called the runtime's operator
 * instead of jumping to it), so each tail call needs no stack of its own
 * on any of the three architectures.  A helper with other parameters was
 * called, not jumped to, and left pcmalloc's own address there, where a
 * plugin's runtime is not found (tests/preload/cxx_operators_plugin.c). */
#define DEFINE_NEW_FAST(fn, name, fn_type, params, args, nothrow)                                     \
    PCM_EXPORT void *fn params __asm__(name);                                                          \
    __attribute__((noinline, visibility("hidden"))) void *pcm_##fn##_slow params;                      \
    void *pcm_##fn##_slow params NEW_BODY(fn, name, fn_type, pcm_malloc(size), args, 0, nothrow)        \
    __attribute__((noinline, cold, visibility("hidden"))) void *pcm_##fn##_restarted params;           \
    void *pcm_##fn##_restarted params                                                                  \
    {                                                                                                  \
        pcm_rseq_count_abort();                                                                        \
        return pcm_##fn##_slow args;                                                                   \
    }                                                                                                  \
    void *fn params                                                                                    \
    {                                                                                                  \
        PCM_MALLOC_RSEQ_ONLY(size, return pcm_##fn##_slow args, return pcm_##fn##_restarted args);     \
        return pcm_##fn##_slow args;                                                                   \
    }

DEFINE_NEW_FAST(cxx_new, NEW, new_fn, (size_t size), (size), false)
DEFINE_NEW_FAST(cxx_new_array, NEW_ARRAY, new_fn, (size_t size), (size), false)
DEFINE_NEW_FAST(cxx_new_nothrow, NEW NOTHROW, new_nothrow_fn, (size_t size, const void *tag), (size, tag), true)
DEFINE_NEW_FAST(cxx_new_array_nothrow, NEW_ARRAY NOTHROW, new_nothrow_fn, (size_t size, const void *tag),
                (size, tag), true)
/* The alignment is a power of two (the language guarantees it); memalign
 * takes any size with it, where C11's aligned_alloc would want a multiple. */
DEFINE_NEW(cxx_new_aligned, NEW ALIGN, new_aligned_fn, pcm_memalign(alignment, size),
           (size_t size, size_t alignment), (size, alignment), alignment, false)
DEFINE_NEW(cxx_new_array_aligned, NEW_ARRAY ALIGN, new_aligned_fn, pcm_memalign(alignment, size),
           (size_t size, size_t alignment), (size, alignment), alignment, false)
DEFINE_NEW(cxx_new_aligned_nothrow, NEW ALIGN NOTHROW, new_aligned_nothrow_fn, pcm_memalign(alignment, size),
           (size_t size, size_t alignment, const void *tag), (size, alignment, tag), alignment, true)
DEFINE_NEW(cxx_new_array_aligned_nothrow, NEW_ARRAY ALIGN NOTHROW, new_aligned_nothrow_fn,
           pcm_memalign(alignment, size), (size_t size, size_t alignment, const void *tag),
           (size, alignment, tag), alignment, true)
