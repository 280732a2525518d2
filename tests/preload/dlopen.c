/*
 * tests/preload/dlopen.c - dlopen and dlclose in a process whose malloc is
 * pcmalloc (LD_PRELOAD; see preloaded.h).
 *
 * pcmalloc is loaded first and serves every malloc after that: the
 * dynamic linker's own (link maps, search paths, dlerror strings) and
 * those of the libraries it opens.  libstdc++.so.6 (present with every
 * toolchain and sysroot the tests run on) is the library that allocates
 * in earnest: its constructors allocate when it is opened (the exception
 * emergency pool), and operator new / operator delete, looked up with
 * dlsym, are malloc and free from inside it.  Also: dlopen(NULL) and
 * dlsym, libgcc_s.so.1 and libm.so.6 opened and closed in a loop around
 * allocations, failed dlopens (the dlerror text is malloc'd by the C
 * library), and all of it while other threads allocate.
 */
#include "preloaded.h"

#include <pthread.h>

#define LOOPS 100u
#define CHURN_THREADS 4u

typedef void *(*new_fn)(size_t);
typedef void (*delete_fn)(void *);
typedef double (*cos_fn)(double);
typedef void *(*malloc_fn)(size_t);

/* operator new(size_t) as mangled for this size_t. */
static const char *operator_new_name(void)
{
    return sizeof(size_t) == 8 ? "_Znwm" : "_Znwj";
}

static bool filled(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

PCM_TEST(dlopen_libstdcxx_allocates_through_pcmalloc)
{
    unsigned char *before = malloc(1000);
    PCM_REQUIRE(before, "malloc failed");
    memset(before, 0xb1, 1000);

    void *lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
    PCM_REQUIRE(lib, "dlopen(libstdc++.so.6): %s", dlerror());
    new_fn op_new = (new_fn)dlsym(lib, operator_new_name());
    delete_fn op_delete = (delete_fn)dlsym(lib, "_ZdlPv");
    PCM_REQUIRE(op_new && op_delete, "operator new (%s) or delete (_ZdlPv) not found in libstdc++.so.6",
                operator_new_name());

    /* operator new is libstdc++'s malloc call: it must get pcmalloc's. */
    void *hundred = op_new(100);
    PCM_CHECK(malloc_usable_size(hundred) == PCM_PRELOAD_CLASS_OF_100,
              "operator new(100) inside libstdc++ got %zu usable bytes, not pcmalloc's %u",
              malloc_usable_size(hundred), PCM_PRELOAD_CLASS_OF_100);
    op_delete(hundred);

    enum { KEPT = 256 };
    unsigned char *kept[KEPT];
    for (unsigned i = 0; i < KEPT; i++) {
        size_t size = i == 0 ? 500 * 1024 : 1 + i * 13;
        kept[i] = op_new(size);
        memset(kept[i], (int)i, size);
        PCM_CHECK(malloc_usable_size(kept[i]) >= size, "operator new(%zu): %zu usable", size,
                  malloc_usable_size(kept[i]));
    }
    for (unsigned i = 0; i < KEPT; i++) {
        size_t size = i == 0 ? 500 * 1024 : 1 + i * 13;
        PCM_CHECK(filled(kept[i], size, (unsigned char)i), "object %u from operator new changed", i);
        op_delete(kept[i]);
    }
    PCM_CHECK(dlclose(lib) == 0, "dlclose(libstdc++.so.6): %s", dlerror());

    PCM_CHECK(filled(before, 1000, 0xb1), "an object allocated before the dlopen changed");
    free(before);
    PCM_CHECK(pcm_preload_usable_of_100() == PCM_PRELOAD_CLASS_OF_100, "malloc changed hands after dlclose");
}

/* One round of opening, using and closing libraries; false on failure
 * (reported). */
static bool dl_round(unsigned n)
{
    unsigned char *a = malloc(64 + n);
    if (!a)
        return false;
    memset(a, 0x3c, 64 + n);

    void *gcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    PCM_CHECK(gcc, "round %u: dlopen(libgcc_s.so.1): %s", n, dlerror());
    PCM_CHECK(!gcc || dlsym(gcc, "_Unwind_GetIP"), "round %u: _Unwind_GetIP not in libgcc_s.so.1", n);

    void *m = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    PCM_CHECK(m, "round %u: dlopen(libm.so.6): %s", n, dlerror());
    cos_fn cosine = m ? (cos_fn)dlsym(m, "cos") : NULL;
    PCM_CHECK(cosine && cosine(0.0) == 1.0, "round %u: cos from libm.so.6", n);

    /* The main program's scope: malloc there is pcmalloc's. */
    void *self = dlopen(NULL, RTLD_NOW);
    PCM_CHECK(self, "round %u: dlopen(NULL): %s", n, dlerror());
    malloc_fn self_malloc = self ? (malloc_fn)dlsym(self, "malloc") : NULL;
    PCM_CHECK(self_malloc && (void *)self_malloc == dlsym(RTLD_DEFAULT, "malloc"),
              "round %u: dlsym(dlopen(NULL), \"malloc\") is not the malloc in use", n);
    if (self_malloc) {
        void *p = self_malloc(100);
        PCM_CHECK(malloc_usable_size(p) == PCM_PRELOAD_CLASS_OF_100, "round %u: malloc via dlsym: %zu usable",
                  n, malloc_usable_size(p));
        free(p);
    }

    /* A failed dlopen: the C library mallocs the message. */
    void *missing = dlopen("libpcmalloc-test-no-such-library.so", RTLD_NOW);
    const char *error = dlerror();
    PCM_CHECK(!missing && error && strstr(error, "no-such-library"), "round %u: dlopen of a missing library: %s",
              n, error ? error : "(no error)");

    if (self)
        dlclose(self);
    if (m)
        dlclose(m);
    if (gcc)
        dlclose(gcc);
    bool intact = filled(a, 64 + n, 0x3c);
    PCM_CHECK(intact, "round %u: an object allocated before the dlopens changed", n);
    free(a);
    return gcc && m && self && intact;
}

PCM_TEST(dlopen_dlclose_loop_with_allocations)
{
    for (unsigned n = 0; n < LOOPS; n++)
        if (!dl_round(n))
            return;
}

static int stop_churn;

static void *churn_thread(void *arg)
{
    uint64_t rng = (pcm_test_seed() + (uintptr_t)arg) | 1;
    unsigned char *ring[32] = {0};
    size_t sizes[32] = {0};
    while (!__atomic_load_n(&stop_churn, __ATOMIC_RELAXED)) {
        unsigned i = (unsigned)(pcm_test_rand(&rng) % 32);
        if (ring[i]) {
            PCM_CHECK(filled(ring[i], sizes[i], (unsigned char)sizes[i]), "a churn thread's object changed");
            free(ring[i]);
        }
        sizes[i] = 1 + (size_t)(pcm_test_rand(&rng) % 4096);
        ring[i] = malloc(sizes[i]);
        if (ring[i])
            memset(ring[i], (unsigned char)sizes[i], sizes[i]);
    }
    for (unsigned i = 0; i < 32; i++)
        free(ring[i]);
    return NULL;
}

PCM_TEST(dlopen_while_threads_allocate)
{
    __atomic_store_n(&stop_churn, 0, __ATOMIC_RELAXED);
    pthread_t threads[CHURN_THREADS];
    unsigned started = 0;
    for (; started < CHURN_THREADS; started++)
        if (pthread_create(&threads[started], NULL, churn_thread, (void *)(uintptr_t)started))
            break;
    PCM_CHECK(started == CHURN_THREADS, "started %u of %u threads", started, CHURN_THREADS);
    for (unsigned n = 0; n < LOOPS / 2; n++) {
        void *lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        PCM_CHECK(lib, "dlopen(libstdc++.so.6): %s", dlerror());
        if (!lib || !dl_round(n))
            break;
        dlclose(lib);
    }
    __atomic_store_n(&stop_churn, 1, __ATOMIC_RELAXED);
    for (unsigned t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
}
