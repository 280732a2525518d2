/*
 * tests/preload/constructor.c - allocation before main and after it, with
 * pcmalloc as the process's malloc (LD_PRELOAD; see preloaded.h).
 *
 * A constructor of priority 101 (the earliest a program may ask for) runs
 * before main and before the program's other constructors: it allocates
 * objects of every kind (small, large, calloc'd, realloc'd, aligned, a
 * strdup from the C library), fills them and keeps them.  main (the test)
 * checks that they were pcmalloc's already then, that they are intact, and
 * frees them.  A destructor of priority 101 allocates and frees after main
 * has returned; if that went wrong the process exits with status 7, which
 * the runner counts as a failure even after the summary line.
 */
#include "preloaded.h"

#include <unistd.h>

#define EARLY_MAX 16u

struct early {
    unsigned char *p;
    size_t size;
    unsigned char value;
    size_t usable;
};

static struct early early[EARLY_MAX];
static unsigned early_count;
static bool early_saw_pcmalloc;
static size_t early_usable_of_100;
static unsigned *early_zeroed;      /* calloc(1000, sizeof *early_zeroed) */
static unsigned char *early_grown;  /* realloc'd from 10 bytes to 200 KiB */
static void *early_aligned;         /* posix_memalign(4096, 5000) */
static char *early_string;          /* strdup */
static bool early_failed;

static void keep(size_t size)
{
    struct early *e = &early[early_count++];
    e->size = size;
    e->value = (unsigned char)(0x40 + early_count);
    e->p = malloc(size);
    if (!e->p) {
        early_failed = true;
        e->size = 0;
        return;
    }
    memset(e->p, e->value, size);
    e->usable = malloc_usable_size(e->p);
}

__attribute__((constructor(101))) static void allocate_before_main(void)
{
    early_saw_pcmalloc = dlsym(RTLD_DEFAULT, "pcm_malloc") != NULL;
    early_usable_of_100 = pcm_preload_usable_of_100();
    static const size_t sizes[] = {1, 16, 100, 1000, 4096, 70000, 300000, (size_t)2 << 20};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        keep(sizes[i]);
    early_zeroed = calloc(1000, sizeof *early_zeroed);
    unsigned char *p = NULL;
    size_t size = 0;
    for (size_t next = 10; next <= 200 * 1024; next *= 3) {
        unsigned char *q = realloc(p, next);
        if (!q) {
            early_failed = true;
            break;
        }
        memset(q + size, (int)(next & 0xff), next - size);
        p = q;
        size = next;
    }
    early_grown = p;
    if (posix_memalign(&early_aligned, 4096, 5000))
        early_aligned = NULL;
    early_string = strdup("allocated before main");
}

__attribute__((destructor(101))) static void allocate_after_main(void)
{
    void *small = malloc(100), *large = malloc(1 << 20);
    if (!small || !large || malloc_usable_size(small) != PCM_PRELOAD_CLASS_OF_100) {
        static const char message[] = "  destructor: malloc after main failed\n";
        ssize_t ignored = write(1, message, sizeof message - 1);
        (void)ignored;
        _exit(7);
    }
    memset(large, 1, 1 << 20);
    free(small);
    free(large);
}

PCM_TEST(constructor_objects_survive_until_main)
{
    PCM_CHECK(early_saw_pcmalloc, "pcm_malloc was not in the process when the constructor ran");
    PCM_CHECK(early_usable_of_100 == PCM_PRELOAD_CLASS_OF_100,
              "before main, malloc_usable_size(malloc(100)) was %zu, not pcmalloc's %u", early_usable_of_100,
              PCM_PRELOAD_CLASS_OF_100);
    PCM_CHECK(!early_failed, "an allocation in the constructor failed");
    for (unsigned i = 0; i < early_count; i++) {
        struct early *e = &early[i];
        if (!e->p)
            continue;
        size_t bad = e->size;
        for (size_t k = 0; k < e->size; k++) {
            if (e->p[k] != e->value) {
                bad = k;
                break;
            }
        }
        PCM_CHECK(bad == e->size, "object %u (%zu bytes) changed at byte %zu before main", i, e->size, bad);
        PCM_CHECK(e->usable >= e->size && malloc_usable_size(e->p) == e->usable,
                  "object %u: usable size %zu in the constructor, %zu now, for %zu bytes", i, e->usable,
                  malloc_usable_size(e->p), e->size);
        free(e->p);
    }
    PCM_REQUIRE(early_zeroed && early_grown && early_aligned && early_string, "an early allocation failed");
    for (unsigned i = 0; i < 1000; i++)
        PCM_CHECK(early_zeroed[i] == 0, "calloc'd word %u is %u", i, early_zeroed[i]);
    free(early_zeroed);
    size_t start = 0;
    for (size_t next = 10; next <= 200 * 1024; start = next, next *= 3)
        for (size_t k = start; k < next; k++)
            if (early_grown[k] != (unsigned char)(next & 0xff)) {
                PCM_CHECK(0, "realloc'd object byte %zu changed", k);
                break;
            }
    free(early_grown);
    PCM_CHECK((uintptr_t)early_aligned % 4096 == 0, "posix_memalign(4096) gave %p", early_aligned);
    free(early_aligned);
    PCM_CHECK(strcmp(early_string, "allocated before main") == 0, "strdup'd string changed: %s", early_string);
    free(early_string);
}
