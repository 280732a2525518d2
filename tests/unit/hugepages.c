/*
 * tests/unit/hugepages.c - PCMALLOC_HUGEPAGES=1 (pcm_opts.hugepages, set
 * directly as the variable would): allocations stay correct, and new
 * segments and large mappings of 2 MiB and more are madvised
 * MADV_HUGEPAGE ("hg" in /proc/self/smaps' VmFlags) and, once touched, are
 * backed by huge pages (AnonHugePages > 0).  Where THP is "madvise" a
 * large mapping made with the option off gets none: the option is what
 * does it.
 *
 * The kernel checks run only where the test's own madvised mapping gets
 * the flag and a huge page (calibration): THP "never" or missing, qemu-user
 * (which takes madvise as a hint and does nothing) and a machine with no
 * free huge page say so and skip them; the allocations are checked
 * everywhere.
 */
#include "harness.h"

#include "pcmalloc.h"

#include "init.h"
#include "layout.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

/* "always", "madvise", "never", or "" when the file is missing. */
static const char *thp_mode(void)
{
    static char mode[16];
    char text[128];
    pcm_test_read_file("/sys/kernel/mm/transparent_hugepage/enabled", text, sizeof text);
    const char *open_bracket = strchr(text, '[');
    const char *close_bracket = open_bracket ? strchr(open_bracket, ']') : NULL;
    if (!close_bracket || (size_t)(close_bracket - open_bracket - 1) >= sizeof mode)
        return "";
    memcpy(mode, open_bracket + 1, (size_t)(close_bracket - open_bracket - 1));
    return mode;
}

/* The kernel's huge page size (hpage_pmd_size), 0 if it does not say. */
static unsigned long huge_page_size(void)
{
    char text[32];
    pcm_test_read_file("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", text, sizeof text);
    unsigned long size = 0;
    for (size_t i = 0; text[i] >= '0' && text[i] <= '9'; i++)
        size = size * 10 + (unsigned long)(text[i] - '0');
    return size;
}

struct vma_info {
    uintptr_t start, end;
    bool found;
    bool hugepage_advised;       /* "hg" in VmFlags */
    unsigned long anon_huge_kib; /* AnonHugePages */
};

/* The mappings of /proc/self/smaps, read by snapshot(). */
#define VMAS_MAX 8192
static struct vma_info vmas[VMAS_MAX];
static size_t vma_count;

static void snapshot(void)
{
    static char text[8 * MIB];
    vma_count = 0;
    pcm_test_read_file("/proc/self/smaps", text, sizeof text);
    struct vma_info *v = NULL;
    for (const char *line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        const char *p = line;
        unsigned long start = pcm_test_parse_hex(&p);
        if (p != line && *p == '-') { /* "start-end perms ...": a mapping */
            p++;
            unsigned long end = pcm_test_parse_hex(&p);
            v = vma_count < VMAS_MAX ? &vmas[vma_count++] : NULL;
            if (v)
                *v = (struct vma_info){start, end, true, false, 0};
            continue;
        }
        if (!v)
            continue;
        if (strncmp(line, "AnonHugePages:", 14) == 0) {
            p = line + 14;
            while (*p == ' ')
                p++;
            while (*p >= '0' && *p <= '9')
                v->anon_huge_kib = v->anon_huge_kib * 10 + (unsigned long)(*p++ - '0');
        } else if (strncmp(line, "VmFlags:", 8) == 0) {
            const char *eol = strchr(line, '\n');
            for (p = line + 8; p + 2 <= (eol ? eol : p + strlen(p)); p++)
                if (p[0] == 'h' && p[1] == 'g' && p[-1] == ' ' && (p[2] == ' ' || p[2] == '\n'))
                    v->hugepage_advised = true;
        }
    }
}

/* The mapping holding addr in the last snapshot. */
static struct vma_info vma_of(const void *addr)
{
    for (size_t i = 0; i < vma_count; i++)
        if (vmas[i].start <= (uintptr_t)addr && (uintptr_t)addr < vmas[i].end)
            return vmas[i];
    return (struct vma_info){0, 0, false, false, 0};
}

/* Can this process get a huge page by madvise at all?  Its own mapping,
 * 2 MiB-aligned, advised and touched, tells. */
static bool kernel_gives_huge_pages(void)
{
    unsigned long huge = huge_page_size();
    if (huge && huge != PCM_HUGE_PAGE_SIZE) {
        pcm_test_printf("  skipped the kernel checks: this kernel's huge pages are %lu KiB, not 2 MiB (a non-PAE i386 "
                        "kernel's are 4 MiB)\n", huge >> 10);
        return false;
    }
    size_t bytes = 2 * PCM_HUGE_PAGE_SIZE;
    char *raw = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return false;
    char *aligned = (char *)PCM_ALIGN_UP((uintptr_t)raw, PCM_HUGE_PAGE_SIZE);
    madvise(aligned, PCM_HUGE_PAGE_SIZE, MADV_HUGEPAGE);
    memset(aligned, 1, PCM_HUGE_PAGE_SIZE);
    snapshot();
    struct vma_info info = vma_of(aligned);
    munmap(raw, bytes);
    if (!info.found || !info.hugepage_advised) {
        pcm_test_printf("  skipped the kernel checks: madvise(MADV_HUGEPAGE) does not reach a kernel here "
                        "(qemu-user?)\n");
        return false;
    }
    if (info.anon_huge_kib == 0) {
        pcm_test_printf("  skipped the kernel checks: the kernel gave the test's own advised mapping no huge page "
                        "either (memory fragmented?)\n");
        return false;
    }
    return true;
}

static unsigned char byte_of(size_t object, size_t i)
{
    return (unsigned char)(object * 31 + i * 7 + 1);
}

enum { SMALL = 3000, SMALL_SIZE = 4000 };

PCM_TEST(hugepages_allocations_work_and_get_huge_pages)
{
    pcm_free(pcm_malloc(1));
    struct pcm_options saved = pcm_opts;
    pcm_opts.hugepages = true;
    pcm_malloc_trim(0); /* no cached large mapping made without the advice */

    /* 12 MiB of small objects: new segments, made with the option on. */
    static unsigned char *small[SMALL];
    for (size_t i = 0; i < SMALL; i++) {
        small[i] = pcm_malloc(SMALL_SIZE);
        PCM_REQUIRE(small[i], "malloc(%d) failed", SMALL_SIZE);
        for (size_t b = 0; b < SMALL_SIZE; b += 512)
            small[i][b] = byte_of(i, b);
    }
    unsigned char *large = pcm_malloc(8 * MIB);
    PCM_REQUIRE(large, "malloc(8 MiB) failed");
    for (size_t b = 0; b < 8 * MIB; b += 4096)
        large[b] = byte_of(1, b);
    /* A buffer realloc grows across 2 MiB gets the advice on the way. */
    unsigned char *grown = pcm_malloc(MIB);
    PCM_REQUIRE(grown, "malloc(1 MiB) failed");
    memset(grown, 0x77, MIB);
    for (size_t size = MIB; size < 5 * MIB; size += 512 * 1024) {
        grown = pcm_realloc(grown, size + 512 * 1024);
        PCM_REQUIRE(grown, "realloc to %zu failed", size + 512 * 1024);
        memset(grown + size, 0x77, 512 * 1024);
    }

    for (size_t i = 0; i < SMALL; i++)
        for (size_t b = 0; b < SMALL_SIZE; b += 512)
            if (small[i][b] != byte_of(i, b)) {
                PCM_CHECK(0, "small object %zu changed at byte %zu", i, b);
                break;
            }
    for (size_t b = 0; b < 8 * MIB; b += 4096)
        if (large[b] != byte_of(1, b)) {
            PCM_CHECK(0, "the 8 MiB object changed at byte %zu", b);
            break;
        }
    for (size_t b = 0; b < 5 * MIB; b += 4096)
        if (grown[b] != 0x77) {
            PCM_CHECK(0, "the grown buffer lost byte %zu", b);
            break;
        }

    const char *mode = thp_mode();
    pcm_test_printf("  transparent huge pages: %s\n", *mode ? mode : "(no /sys/kernel/mm/transparent_hugepage)");
    if (strcmp(mode, "always") != 0 && strcmp(mode, "madvise") != 0) {
        pcm_test_printf("  skipped the kernel checks: THP is not \"always\" or \"madvise\" here\n");
    } else if (kernel_gives_huge_pages()) {
        snapshot();
        /* The segments made before the option was set are not advised;
         * which heap (and so which segments) served which object depends
         * on the CPUs the thread ran on: any advised one will do. */
        struct vma_info seg = vma_of(small[SMALL - 1]);
        for (size_t i = 0; i < SMALL && !(seg.hugepage_advised && seg.anon_huge_kib); i++)
            seg = vma_of(small[i]);
        struct vma_info big = vma_of(large), buf = vma_of(grown);
        pcm_test_printf("  AnonHugePages: %lu KiB in the segments' mapping, %lu KiB in the 8 MiB object's, "
                        "%lu KiB in the grown buffer's\n",
                        seg.anon_huge_kib, big.anon_huge_kib, buf.anon_huge_kib);
        PCM_CHECK(seg.found && seg.hugepage_advised, "a new segment is not madvised MADV_HUGEPAGE");
#ifdef PCM_HARDENED
        /* The hardened build's guard pages (after the header, at the end)
         * split both 2 MiB halves of every segment: none can be huge. */
        pcm_test_printf("  hardened build: no huge page expected in a segment (its guard pages split them)\n");
#else
        PCM_CHECK(seg.anon_huge_kib > 0, "a new, touched segment has no huge page");
#endif
        PCM_CHECK(big.found && big.hugepage_advised, "the 8 MiB object is not madvised MADV_HUGEPAGE");
        PCM_CHECK(big.anon_huge_kib >= 2048, "the touched 8 MiB object has %lu KiB of huge pages",
                  big.anon_huge_kib);
        PCM_CHECK(buf.found && buf.hugepage_advised, "a buffer grown past 2 MiB is not madvised MADV_HUGEPAGE");

        if (strcmp(mode, "madvise") == 0) {
            /* Without the option: no advice, so no huge page. */
            pcm_opts.hugepages = false;
            unsigned char *plain = pcm_malloc(8 * MIB);
            PCM_REQUIRE(plain, "malloc(8 MiB) failed");
            memset(plain, 3, 8 * MIB);
            snapshot();
            struct vma_info off = vma_of(plain);
            PCM_CHECK(off.found && !off.hugepage_advised && off.anon_huge_kib == 0,
                      "with the option off an 8 MiB object is %s, with %lu KiB of huge pages",
                      off.hugepage_advised ? "advised" : "not advised", off.anon_huge_kib);
            pcm_free(plain);
        }
    }

    for (size_t i = 0; i < SMALL; i++)
        pcm_free(small[i]);
    pcm_free(large);
    pcm_free(grown);
    pcm_malloc_trim(0);
    pcm_opts = saved;
}
