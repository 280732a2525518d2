/*
 * tests/preload/libc_names.c - glibc's second names for its allocator
 * (__libc_malloc, __libc_free, __libc_calloc, __libc_realloc,
 * __libc_memalign, __libc_valloc, __libc_pvalloc, __libc_mallinfo,
 * __libc_mallopt, and the old cfree), which programs and libraries may
 * call directly, are pcmalloc's with it preloaded (src/preload.c:
 * ALSO_NAMED; api.c):
 *   - each binds to libpcmalloc, with glibc's own behind it;
 *   - objects cross between the two sets of names either way: made by one,
 *     resized and freed by the other, their bytes intact, every one a
 *     pcmalloc object (usable size 112 for 100 bytes, alignments kept);
 *   - a second free by the other name dies as pcmalloc's double free.
 */
#include "preloaded.h"

#include <signal.h>
#include <stdint.h>
#include <unistd.h>

/* Exported by glibc, declared by no header. */
void *__libc_malloc(size_t size);
void __libc_free(void *p);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);
struct mallinfo __libc_mallinfo(void);
int __libc_mallopt(int param, int value);

static const char *const names[] = {
    "__libc_malloc",  "__libc_free",   "__libc_calloc",   "__libc_realloc", "__libc_memalign",
    "__libc_valloc",  "__libc_pvalloc", "__libc_mallinfo", "__libc_mallopt", "cfree",
};
#define COUNT(a) (sizeof(a) / sizeof(a)[0])

/* cfree is a compatibility symbol of glibc's: old binaries call it, new
 * ones cannot link it, so the test looks it up. */
typedef void (*cfree_fn)(void *);
static cfree_fn cfree_bound(void)
{
    return (cfree_fn)dlsym(RTLD_DEFAULT, "cfree");
}

PCM_TEST(libc_names_bind_to_pcmalloc_with_glibc_behind_them)
{
    void *glibc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    PCM_CHECK(glibc != NULL, "libc.so.6 is not loaded: %s", dlerror());
    for (unsigned i = 0; i < COUNT(names); i++) {
        const char *provider = pcm_preload_provider(RTLD_DEFAULT, names[i]);
        PCM_CHECK(pcm_preload_from_pcmalloc(RTLD_DEFAULT, names[i]), "%s binds to %s, not libpcmalloc", names[i],
                  provider ? provider : "nothing");
        if (!strcmp(names[i], "cfree"))
            continue; /* (glibc's is a compatibility symbol: dlsym does not see it) */
        void *own = glibc ? dlsym(glibc, names[i]) : NULL;
        PCM_CHECK(own && own != dlsym(RTLD_DEFAULT, names[i]), "%s: glibc has no definition of its own behind "
                  "pcmalloc's", names[i]);
    }
    if (glibc)
        dlclose(glibc);
}

static void fill(void *p, size_t bytes, unsigned char seed)
{
    for (size_t i = 0; i < bytes; i++)
        ((unsigned char *)p)[i] = (unsigned char)(seed + i);
}

static bool intact(const void *p, size_t bytes, unsigned char seed)
{
    for (size_t i = 0; i < bytes; i++)
        if (((const unsigned char *)p)[i] != (unsigned char)(seed + i))
            return false;
    return true;
}

PCM_TEST(libc_names_and_standard_names_share_their_objects)
{
    /* __libc_malloc's object: pcmalloc's class, grown by realloc, freed by free. */
    char *a = __libc_malloc(100);
    PCM_REQUIRE(a, "__libc_malloc(100) failed");
    PCM_CHECK(malloc_usable_size(a) == PCM_PRELOAD_CLASS_OF_100, "__libc_malloc(100): usable %zu, not %u",
              malloc_usable_size(a), PCM_PRELOAD_CLASS_OF_100);
    fill(a, 100, 1);
    a = realloc(a, 5000);
    PCM_REQUIRE(a, "realloc of __libc_malloc's object failed");
    PCM_CHECK(intact(a, 100, 1), "realloc lost __libc_malloc's bytes");
    free(a);

    /* malloc's object, grown by __libc_realloc, freed by __libc_free. */
    char *b = malloc(100);
    PCM_REQUIRE(b, "malloc(100) failed");
    fill(b, 100, 2);
    b = __libc_realloc(b, 300000); /* a large object */
    PCM_REQUIRE(b, "__libc_realloc failed");
    PCM_CHECK(intact(b, 100, 2), "__libc_realloc lost malloc's bytes");
    __libc_free(b);

    /* __libc_calloc: zeroed; cfree frees it. */
    unsigned char *c = __libc_calloc(25, 4);
    PCM_REQUIRE(c, "__libc_calloc failed");
    PCM_CHECK(malloc_usable_size(c) == PCM_PRELOAD_CLASS_OF_100, "__libc_calloc(25, 4): usable %zu",
              malloc_usable_size(c));
    for (unsigned i = 0; i < 100; i++)
        PCM_CHECK(c[i] == 0, "__libc_calloc byte %u is %u", i, c[i]);
    PCM_REQUIRE(cfree_bound(), "cfree not found");
    cfree_bound()(c);

    /* The aligned ones keep their alignments. */
    void *m = __libc_memalign(256, 1000), *v = __libc_valloc(100), *pv = __libc_pvalloc(100);
    PCM_REQUIRE(m && v && pv, "__libc_memalign, __libc_valloc or __libc_pvalloc failed");
    long page = sysconf(_SC_PAGESIZE);
    PCM_CHECK((uintptr_t)m % 256 == 0, "__libc_memalign(256, ...) gave %p", m);
    PCM_CHECK((uintptr_t)v % (uintptr_t)page == 0, "__libc_valloc gave %p", v);
    PCM_CHECK((uintptr_t)pv % (uintptr_t)page == 0 && malloc_usable_size(pv) >= (size_t)page,
              "__libc_pvalloc gave %p, usable %zu", pv, malloc_usable_size(pv));
    free(m);
    __libc_free(v);
    free(pv);

    /* mallinfo and mallopt answer as pcmalloc's do. */
    struct mallinfo2 ours = mallinfo2();
    struct mallinfo theirs = __libc_mallinfo();
    PCM_CHECK(ours.arena == (size_t)(unsigned)theirs.arena && ours.arena > 0,
              "mallinfo2's arena %zu, __libc_mallinfo's %d", ours.arena, theirs.arena);
    PCM_CHECK(__libc_mallopt(M_TRIM_THRESHOLD, 1 << 20) == mallopt(M_TRIM_THRESHOLD, 1 << 20),
              "__libc_mallopt and mallopt differ");
}

static int free_twice_by_two_names(void *unused)
{
    (void)unused;
    void *p = malloc(48);
    __libc_free(p);
    free(p);
    return 0; /* survived: wrong */
}

PCM_TEST(libc_free_then_free_dies_as_a_double_free)
{
    struct pcm_test_child out = pcm_test_run_child(free_twice_by_two_names, NULL, 60);
    PCM_REQUIRE(out.ran, "could not run the child");
    PCM_CHECK(out.signaled && out.signal == SIGABRT && strstr(out.text, "double free of 0x"),
              "__libc_free then free: the child %s %d; stderr: \"%s\"",
              out.signaled ? "died of signal" : "exited with status", out.signaled ? out.signal : out.exit_status,
              out.text);
}
