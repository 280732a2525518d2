/*
 * tests/unit/os_linux.c - the Linux platform layer (src/os_linux.c).
 *
 * Runs on the libc platform only: it reads /proc and /sys, sets variables
 * and re-executes itself (posix_spawn).  It uses no stdio and no malloc between the two
 * reads of /proc/self/maps that measure a mapping, so nothing but the code
 * under test changes the address space there.
 */
#include "harness.h"

#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

static long read_whole(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap)
            break;
    }
    close(fd);
    return (long)len;
}

/* Total bytes of all mappings in /proc/self/maps, or 0 if unreadable.
 * Streams the file through a static buffer: no allocation. */
static unsigned long long mapped_bytes(void)
{
    static char chunk[8192];
    static char line[512];
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unsigned long long total = 0;
    size_t used = 0;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] != '\n') {
                if (used < sizeof line - 1)
                    line[used++] = chunk[i];
                continue;
            }
            line[used] = '\0';
            used = 0;
            const char *p = line;
            unsigned long start = pcm_test_parse_hex(&p);
            if (*p++ != '-')
                continue;
            unsigned long end = pcm_test_parse_hex(&p);
            total += end - start;
        }
    }
    close(fd);
    return total;
}

static bool all_bytes(const unsigned char *p, size_t n, unsigned char value)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != value)
            return false;
    return true;
}

/* ---- mappings ---- */

PCM_TEST(os_page_size)
{
    size_t page = pcm_os_page_size();
    PCM_CHECK(page >= 4096 && (page & (page - 1)) == 0, "page size %zu", page);
    PCM_CHECK(page == (size_t)sysconf(_SC_PAGESIZE), "page size %zu vs sysconf %ld", page,
              sysconf(_SC_PAGESIZE));
}

PCM_TEST(os_map_and_unmap)
{
    size_t page = pcm_os_page_size();
    unsigned char *p = pcm_os_map(3 * page);
    PCM_REQUIRE(p != NULL, "map failed, errno %d", errno);
    PCM_CHECK(((uintptr_t)p & (page - 1)) == 0, "map %p not page-aligned", (void *)p);
    PCM_CHECK(all_bytes(p, 3 * page, 0), "fresh mapping not zero");
    memset(p, 0x5a, 3 * page);
    PCM_CHECK(all_bytes(p, 3 * page, 0x5a), "mapping not writable");
    pcm_os_unmap(p, 3 * page);
    pcm_os_unmap(NULL, page); /* allowed, does nothing */

    errno = 0;
    PCM_CHECK(pcm_os_map(0) == NULL && errno == ENOMEM, "map(0): errno %d", errno);
    errno = 0;
    void *huge = pcm_os_map((size_t)-1 - page);
    PCM_CHECK(huge == NULL && errno == ENOMEM, "absurd map: %p errno %d", huge, errno);
}

PCM_TEST(os_map_aligned)
{
    static const size_t alignments[] = {
        64 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024, 32 * 1024 * 1024,
    };
    size_t page = pcm_os_page_size();
    size_t sizes[] = {page, 3 * page, 1024 * 1024 + page, 4 * 1024 * 1024};
    for (size_t a = 0; a < sizeof alignments / sizeof alignments[0]; a++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t align = alignments[a], bytes = sizes[s];
            unsigned long long before = mapped_bytes();
            unsigned char *p = pcm_os_map_aligned(bytes, align);
            unsigned long long after = mapped_bytes();
            PCM_REQUIRE(p != NULL, "map_aligned(%zu, %zu) failed, errno %d", bytes, align, errno);
            PCM_CHECK(((uintptr_t)p & (align - 1)) == 0, "map_aligned(%zu, %zu) = %p", bytes,
                      align, (void *)p);
            /* Head and tail were given back: the address space grew by
             * exactly the request (VMA merges with neighbours do not
             * change the total). */
            PCM_CHECK(before == 0 || after - before == bytes,
                      "map_aligned(%zu, %zu): %llu bytes more mapped", bytes, align,
                      after - before);
            p[0] = 1;
            p[bytes - 1] = 2;
            PCM_CHECK(p[0] == 1 && p[bytes - 1] == 2, "ends not writable");
            pcm_os_unmap(p, bytes);
            PCM_CHECK(before == 0 || mapped_bytes() == before, "unmap left %llu bytes",
                      mapped_bytes() - before);
        }
    }
    PCM_CHECK(mapped_bytes() != 0, "/proc/self/maps unreadable: release not checked");

    /* At or below a page it is a plain mapping. */
    void *p = pcm_os_map_aligned(page, page);
    PCM_CHECK(p != NULL && ((uintptr_t)p & (page - 1)) == 0, "page-aligned map %p", p);
    pcm_os_unmap(p, page);
    errno = 0;
    PCM_CHECK(pcm_os_map_aligned(page, 3 * page) == NULL && errno == EINVAL,
              "alignment not a power of two: errno %d", errno);
    errno = 0;
    PCM_CHECK(pcm_os_map_aligned((size_t)-1 - page, 1024 * 1024) == NULL && errno == ENOMEM,
              "absurd aligned map: errno %d", errno);
}

PCM_TEST(os_map_aligned_neighbours_free)
{
    /* The page right below and right above an aligned mapping were part
     * of the over-mapping (for one of them at least, the slack was
     * there); check that the kernel lets us place a page at either
     * unless something else already lives there, by asking for the exact
     * address without replacing anything. */
    size_t page = pcm_os_page_size(), align = 4 * 1024 * 1024, bytes = 16 * page;
    unsigned char *p = pcm_os_map_aligned(bytes, align);
    PCM_REQUIRE(p != NULL, "map_aligned failed");
    unsigned freed = 0;
    void *below = mmap(p - page, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                       -1, 0);
    if (below == p - page) {
        freed++;
        munmap(below, page);
    } else if (below != MAP_FAILED) {
        munmap(below, page); /* old kernel: hint only, landed elsewhere */
    }
    void *above = mmap(p + bytes, page, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (above == p + bytes) {
        freed++;
        munmap(above, page);
    } else if (above != MAP_FAILED) {
        munmap(above, page);
    }
    PCM_CHECK(freed >= 1, "neither neighbour of an aligned mapping is free");
    pcm_os_unmap(p, bytes);
}

/* pcm_os_map_at: exactly there where the space is free; where it is not,
 * NULL, and what was there is untouched (never MAP_FIXED). */
PCM_TEST(os_map_at_free_or_nothing)
{
    size_t page = pcm_os_page_size();
    unsigned char *p = pcm_os_map(4 * page);
    PCM_REQUIRE(p != NULL, "map failed");
    memset(p, 0x5a, 4 * page);
    pcm_os_unmap(p + 2 * page, 2 * page); /* free space above p's first two pages */
    unsigned char *at = pcm_os_map_at(p + 2 * page, 2 * page);
    PCM_CHECK(at == p + 2 * page, "map_at a free address gave %p, not %p", (void *)at, (void *)(p + 2 * page));
    if (at)
        PCM_CHECK(at[0] == 0 && at[2 * page - 1] == 0, "a fresh mapping that is not zero");
    PCM_CHECK(pcm_os_map_at(p, page) == NULL, "map_at an address in use succeeded");
    PCM_CHECK(p[0] == 0x5a && p[page - 1] == 0x5a, "map_at an address in use changed its contents");
    pcm_os_unmap(p, 2 * page);
    if (at)
        pcm_os_unmap(at, 2 * page);
}

PCM_TEST(os_decommit_zeroes_and_stays_mapped)
{
    size_t page = pcm_os_page_size(), bytes = 8 * page;
    unsigned char *p = pcm_os_map(bytes);
    PCM_REQUIRE(p != NULL, "map failed");
    memset(p, 0xab, bytes);
    /* Decommit the middle; the edges keep their contents. */
    PCM_CHECK(pcm_os_decommit(p + 2 * page, 4 * page), "decommit failed, errno %d", errno);
    PCM_CHECK(all_bytes(p, 2 * page, 0xab), "head changed");
    PCM_CHECK(all_bytes(p + 2 * page, 4 * page, 0), "decommitted range not zero");
    PCM_CHECK(all_bytes(p + 6 * page, 2 * page, 0xab), "tail changed");
    memset(p + 2 * page, 0x11, 4 * page);
    PCM_CHECK(all_bytes(p + 2 * page, 4 * page, 0x11), "not writable after decommit");
    pcm_os_unmap(p, bytes);
}

PCM_TEST(os_remap_fixed_moves_without_losing_contents)
{
    size_t page = pcm_os_page_size();
    unsigned char *p = pcm_os_map(2 * page);
    unsigned char *target = pcm_os_map(64 * page);
    PCM_REQUIRE(p != NULL && target != NULL, "map failed");
    for (size_t i = 0; i < 2 * page; i++)
        p[i] = (unsigned char)(i * 7 + 3);
    memset(target, 0x55, 64 * page); /* the reservation's old contents must not show */
    unsigned char *q = pcm_os_remap_fixed(p, 2 * page, 64 * page, target);
    PCM_REQUIRE(q == target, "remap_fixed gave %p, not the target %p (errno %d)", (void *)q, (void *)target, errno);
    bool same = true;
    for (size_t i = 0; i < 2 * page; i++)
        same &= q[i] == (unsigned char)(i * 7 + 3);
    PCM_CHECK(same, "contents lost moving");
    PCM_CHECK(all_bytes(q + 2 * page, 62 * page, 0), "grown part not zero");
    pcm_os_unmap(q, 64 * page);
}

/* A byte of a pattern that differs from page to page and piece to piece. */
static unsigned char pattern_byte(size_t i)
{
    return (unsigned char)(i * 7 + (i >> 12) * 13 + 3);
}

static bool holds_pattern(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern_byte(i))
            return false;
    return true;
}

/* A source of 5 MiB and 3 pages, aligned to a piece, and a 9 MiB target
 * reservation: the move takes three pieces (2, 2 and 1 MiB + 3 pages, the
 * last grown by 4 MiB - 3 pages onto the reservation). */
struct move_case {
    unsigned char *source, *target;
    size_t old_bytes, new_bytes;
};

static struct move_case move_case_make(void)
{
    size_t page = pcm_os_page_size();
    struct move_case m = {NULL, NULL, 5 * PCM_OS_PIECE_BYTES / 2 + 3 * page, 9 * PCM_OS_PIECE_BYTES / 2};
    m.source = pcm_os_map_aligned(m.old_bytes, PCM_OS_PIECE_BYTES);
    m.target = pcm_os_map_aligned(m.new_bytes, PCM_OS_PIECE_BYTES);
    if (m.source && m.target) {
        for (size_t i = 0; i < m.old_bytes; i++)
            m.source[i] = pattern_byte(i);
        memset(m.target, 0x55, m.new_bytes); /* the reservation's old contents must not show */
    }
    return m;
}

/* After a move by whatever means: target holds the pattern, then zeros;
 * the source range is mapped no more. */
static void move_case_check(struct move_case m, unsigned long long mapped_before, const char *how)
{
    PCM_CHECK(holds_pattern(m.target, m.old_bytes), "%s: contents lost moving", how);
    PCM_CHECK(all_bytes(m.target + m.old_bytes, m.new_bytes - m.old_bytes, 0), "%s: grown part not zero", how);
    unsigned long long after = mapped_bytes();
    PCM_CHECK(mapped_before == 0 || mapped_before - after == m.old_bytes,
              "%s: %llu bytes fewer mapped, want the source's %zu", how, mapped_before - after, m.old_bytes);
    pcm_os_unmap(m.target, m.new_bytes);
}

PCM_TEST(os_remap_fixed_moves_in_pieces)
{
    struct move_case m = move_case_make();
    PCM_REQUIRE(m.source && m.target, "map failed");
    unsigned long long before = mapped_bytes();
    pcm_os_fault_arm(PCM_OS_CALL_MREMAP, LONG_MAX, false); /* count only */
    unsigned char *q = pcm_os_remap_fixed(m.source, m.old_bytes, m.new_bytes, m.target);
    unsigned long calls = pcm_os_fault_seen(PCM_OS_CALL_MREMAP);
    pcm_os_fault_disarm();
    PCM_REQUIRE(q == m.target, "remap_fixed gave %p, not the target %p (errno %d)", (void *)q, (void *)m.target,
                errno);
    PCM_CHECK(calls == 3, "moved in %lu calls, want 3 of at most %zu bytes", calls, PCM_OS_PIECE_BYTES);
    move_case_check(m, before, "in pieces");
}

PCM_TEST(os_remap_fixed_refused_part_way_copies)
{
    /* The second piece's mremap refused: the first has moved, so the rest
     * is copied and the call still succeeds. */
    struct move_case m = move_case_make();
    PCM_REQUIRE(m.source && m.target, "map failed");
    unsigned long long before = mapped_bytes();
    pcm_os_fault_arm(PCM_OS_CALL_MREMAP, 2, false);
    unsigned char *q = pcm_os_remap_fixed(m.source, m.old_bytes, m.new_bytes, m.target);
    pcm_os_fault_disarm();
    PCM_REQUIRE(q == m.target, "remap_fixed gave %p, not the target %p (errno %d)", (void *)q, (void *)m.target,
                errno);
    move_case_check(m, before, "refused part way");

    /* Refused at once: NULL + ENOMEM, both as they were. */
    m = move_case_make();
    PCM_REQUIRE(m.source && m.target, "map failed");
    pcm_os_fault_arm(PCM_OS_CALL_MREMAP, 1, false);
    errno = 0;
    q = pcm_os_remap_fixed(m.source, m.old_bytes, m.new_bytes, m.target);
    pcm_os_fault_disarm();
    PCM_CHECK(q == NULL && errno == ENOMEM, "refused move: %p errno %d", (void *)q, errno);
    PCM_CHECK(holds_pattern(m.source, m.old_bytes), "a refused move damaged the source");
    PCM_CHECK(all_bytes(m.target, m.new_bytes, 0x55), "a refused move damaged the target");
    pcm_os_unmap(m.source, m.old_bytes);
    pcm_os_unmap(m.target, m.new_bytes);
}

PCM_TEST(os_decommit_and_unmap_in_pieces)
{
    /* From a page past a piece boundary, 2 pieces and 2 pages: calls of
     * piece - page, piece and 3 pages... */
    size_t page = pcm_os_page_size(), piece = PCM_OS_PIECE_BYTES;
    unsigned char *base = pcm_os_map_aligned(4 * piece, piece);
    PCM_REQUIRE(base != NULL, "map failed");
    unsigned char *p = base + page;
    size_t bytes = 2 * piece + 2 * page;
    memset(base, 0xab, 4 * piece);
    pcm_os_fault_arm(PCM_OS_CALL_MADVISE, LONG_MAX, false);
    bool ok = pcm_os_decommit(p, bytes);
    unsigned long calls = pcm_os_fault_seen(PCM_OS_CALL_MADVISE);
    pcm_os_fault_disarm();
    PCM_CHECK(ok, "decommit failed, errno %d", errno);
    PCM_CHECK(calls == 3, "decommitted in %lu calls, want 3", calls);
    PCM_CHECK(all_bytes(base, page, 0xab) && all_bytes(p + bytes, 4 * piece - page - bytes, 0xab),
              "decommit reached outside its range");
    PCM_CHECK(all_bytes(p, bytes, 0), "decommitted range not zero");

    /* ...and a refusal of the second piece: false, the first piece
     * dropped, the rest untouched. */
    memset(base, 0xcd, 4 * piece);
    pcm_os_fault_arm(PCM_OS_CALL_MADVISE, 2, false);
    errno = 0;
    ok = pcm_os_decommit(p, bytes);
    pcm_os_fault_disarm();
    PCM_CHECK(!ok && errno == ENOMEM, "refused decommit: %d errno %d", ok, errno);
    PCM_CHECK(all_bytes(p, piece - page, 0) && all_bytes(p + piece - page, bytes - (piece - page), 0xcd),
              "a decommit refused at its second piece");

    /* Unmapped piece by piece, all of it. */
    unsigned long long before = mapped_bytes();
    pcm_os_unmap(p, bytes);
    PCM_CHECK(before == 0 || before - mapped_bytes() == bytes, "unmapped %llu bytes, want %zu",
              before - mapped_bytes(), bytes);
    PCM_CHECK(all_bytes(base, page, 0xcd) && all_bytes(p + bytes, 4 * piece - page - bytes, 0xcd),
              "unmap reached outside its range");
    pcm_os_unmap(base, page);
    pcm_os_unmap(p + bytes, 4 * piece - page - bytes);
}

PCM_TEST(os_remap_in_place_keeps_the_address)
{
    size_t page = pcm_os_page_size();
    /* Map 64 pages and give back the top 62: the hole above stays free in
     * this single-threaded test, so a kernel grows in place.  (qemu-user's
     * own map of a 32-bit guest may refuse; then the refusal must be clean:
     * NULL, ENOMEM, the mapping as it was.) */
    unsigned char *p = pcm_os_map(64 * page);
    PCM_REQUIRE(p != NULL, "map failed");
    pcm_os_unmap(p + 2 * page, 62 * page);
    memset(p, 0x3c, 2 * page);
    errno = 0;
    unsigned char *q = pcm_os_remap_in_place(p, 2 * page, 64 * page);
    PCM_CHECK(q == p || (q == NULL && errno == ENOMEM), "grew to %p, not in place at %p (errno %d)", (void *)q,
              (void *)p, errno);
    PCM_CHECK(all_bytes(p, 2 * page, 0x3c), "contents lost growing in place");
    if (q == p)
        PCM_CHECK(pcm_os_remap_in_place(p, 64 * page, page) == p, "shrinking in place failed");
    else
        PCM_CHECK(pcm_os_remap_in_place(p, 2 * page, page) == p, "shrinking in place failed");
    /* Above it now: another mapping, so growing in place must refuse. */
    unsigned char *wall = mmap(p + page, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (wall == p + page) {
        errno = 0;
        PCM_CHECK(pcm_os_remap_in_place(p, page, 4 * page) == NULL && errno == ENOMEM,
                  "grew in place over another mapping (errno %d)", errno);
        PCM_CHECK(all_bytes(p, page, 0x3c), "a refused growth damaged the mapping");
        munmap(wall, page);
    }
    pcm_os_unmap(p, page);
}

/* ---- fault injection ---- */

PCM_TEST(os_fault_injection)
{
    size_t page = pcm_os_page_size();

    pcm_os_fail_after(1);
    errno = 0;
    void *p = pcm_os_map(page);
    PCM_CHECK(p == NULL && errno == ENOMEM, "injected map: %p errno %d", p, errno);
    p = pcm_os_map(page);
    PCM_REQUIRE(p != NULL, "map after the injected failure failed");

    /* The second call fails, not the first. */
    pcm_os_fail_after(2);
    void *first = pcm_os_map(page);
    errno = 0;
    void *second = pcm_os_map(page);
    PCM_CHECK(first != NULL, "first of two failed");
    PCM_CHECK(second == NULL && errno == ENOMEM, "second of two: %p errno %d", second, errno);
    pcm_os_unmap(first, page);

    /* remap: NULL + ENOMEM and the old mapping intact. */
    memset(p, 0x77, page);
    pcm_os_fail_after(1);
    errno = 0;
    void *q = pcm_os_remap_in_place(p, page, 4 * page);
    PCM_CHECK(q == NULL && errno == ENOMEM, "injected remap: %p errno %d", q, errno);
    PCM_CHECK(all_bytes(p, page, 0x77), "old mapping damaged by failed remap");

    /* decommit: false + ENOMEM, contents untouched. */
    pcm_os_fail_after(1);
    errno = 0;
    PCM_CHECK(!pcm_os_decommit(p, page) && errno == ENOMEM, "injected decommit: errno %d", errno);
    PCM_CHECK(all_bytes(p, page, 0x77), "failed decommit dropped the contents");
    PCM_CHECK(pcm_os_decommit(p, page) && all_bytes(p, page, 0), "decommit after recovery");

    /* aligned mapping goes through the same failure. */
    pcm_os_fail_after(1);
    errno = 0;
    PCM_CHECK(pcm_os_map_aligned(page, 1024 * 1024) == NULL && errno == ENOMEM,
              "injected aligned map: errno %d", errno);

    /* Disabling cancels a pending failure. */
    pcm_os_fail_after(1);
    pcm_os_fail_after(-1);
    void *r = pcm_os_map(page);
    PCM_CHECK(r != NULL, "map failed with injection disabled");
    pcm_os_unmap(r, page);
    pcm_os_unmap(p, page);
    pcm_os_fail_after(-1);
}

/* Each kind of call is counted and failed on its own; persistent failures
 * go on until disarmed. */
PCM_TEST(os_fault_injection_by_kind)
{
    size_t page = pcm_os_page_size();
    unsigned char *p = pcm_os_map(page);
    PCM_REQUIRE(p != NULL, "map failed");
    memset(p, 0x5a, page);

    /* Only mremap armed: maps and decommits pass and are not counted. */
    pcm_os_fault_arm(PCM_OS_CALL_MREMAP, 1, false);
    void *other = pcm_os_map(page);
    PCM_CHECK(other != NULL, "a map failed while only mremap was armed");
    PCM_CHECK(pcm_os_decommit(other, page), "a decommit failed while only mremap was armed");
    errno = 0;
    PCM_CHECK(pcm_os_remap_in_place(p, page, 2 * page) == NULL && errno == ENOMEM,
              "the armed mremap did not fail (errno %d)", errno);
    PCM_CHECK(pcm_os_fault_seen(PCM_OS_CALL_MREMAP) == 1 && pcm_os_fault_seen(PCM_OS_CALL_MMAP) == 0 &&
                  pcm_os_fault_seen(PCM_OS_CALL_MADVISE) == 0,
              "counted %lu mremap, %lu mmap, %lu madvise; want 1, 0, 0",
              pcm_os_fault_seen(PCM_OS_CALL_MREMAP), pcm_os_fault_seen(PCM_OS_CALL_MMAP),
              pcm_os_fault_seen(PCM_OS_CALL_MADVISE));
    pcm_os_unmap(other, page);

    /* madvise: the second one fails, once. */
    pcm_os_fault_arm(PCM_OS_CALL_MADVISE, 2, false);
    PCM_CHECK(pcm_os_decommit(p, page), "the first madvise failed");
    errno = 0;
    PCM_CHECK(!pcm_os_decommit(p, page) && errno == ENOMEM, "the second madvise did not fail");
    PCM_CHECK(pcm_os_decommit(p, page), "the third madvise failed: the failure did not stop");
    PCM_CHECK(pcm_os_fault_seen(PCM_OS_CALL_ANY) == 3, "counted %lu calls, want 3",
              pcm_os_fault_seen(PCM_OS_CALL_ANY));

    /* Persistent mmap failures, from the second on, until disarmed. */
    pcm_os_fault_arm(PCM_OS_CALL_MMAP, 2, true);
    void *first = pcm_os_map(page);
    PCM_CHECK(first != NULL, "the first map failed");
    for (int i = 0; i < 3; i++) {
        errno = 0;
        void *q = pcm_os_map(page);
        PCM_CHECK(q == NULL && errno == ENOMEM, "persistent failure %d: %p errno %d", i, q, errno);
    }
    pcm_os_fault_disarm();
    void *after = pcm_os_map(page);
    PCM_CHECK(after != NULL, "a map failed after disarming");
    pcm_os_unmap(after, page);
    pcm_os_unmap(first, page);

    /* A dry run counts without failing. */
    pcm_os_fault_arm(PCM_OS_CALL_ANY, __LONG_MAX__, false);
    for (int i = 0; i < 4; i++) {
        void *q = pcm_os_map(page);
        PCM_CHECK(q != NULL, "a counting-only arm failed map %d", i);
        pcm_os_unmap(q, page);
    }
    PCM_CHECK(pcm_os_fault_seen(PCM_OS_CALL_MMAP) == 4, "dry run counted %lu maps, want 4",
              pcm_os_fault_seen(PCM_OS_CALL_MMAP));
    pcm_os_fault_disarm();
    pcm_os_unmap(p, page);
}

/* ---- CPUs ---- */

PCM_TEST(os_parse_cpu_list)
{
    static const struct {
        const char *text;
        unsigned want;
    } cases[] = {
        {"0", 1},        {"0\n", 1},         {"0-7", 8},       {"0-7\n", 8},
        {"0,2-5", 6},    {"0,2-5\n", 6},     {"3", 4},         {"0-3,8-11\n", 12},
        {"1,0", 2},      {"0-0", 1},         {"0-4095", 4096}, {"", 0},
        {"\n", 0},       {"a", 0},           {"0-", 0},        {"-1", 0},
        {"5-3", 0},      {"0,,1", 0},        {"0,", 0},        {"0-7\n\n", 0},
        {"0 - 7", 0},    {"99999999999", 0}, {"0-7x", 0},      {" 0", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned got = pcm_os_parse_cpu_list(cases[i].text, strlen(cases[i].text));
        PCM_CHECK(got == cases[i].want, "\"%s\" -> %u, want %u", cases[i].text, got,
                  cases[i].want);
    }
}

PCM_TEST(os_cpu_count)
{
    errno = 4321;
    unsigned count = pcm_os_cpu_count();
    PCM_CHECK(errno == 4321, "errno changed to %d", errno);
    PCM_CHECK(count >= 1, "cpu count %u", count);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    PCM_CHECK(online <= 0 || count >= (unsigned long)online, "count %u below %ld online", count,
              online);

    /* Our own, naive reading of the same file: the largest number + 1. */
    char text[4096];
    long len = read_whole("/sys/devices/system/cpu/possible", text, sizeof text - 1);
    if (len > 0) {
        text[len] = '\0';
        unsigned highest = 0, v = 0;
        bool in_number = false;
        for (long i = 0; i <= len; i++) {
            if (text[i] >= '0' && text[i] <= '9') {
                v = v * 10 + (unsigned)(text[i] - '0');
                in_number = true;
            } else {
                if (in_number && v + 1 > highest)
                    highest = v + 1;
                v = 0;
                in_number = false;
            }
        }
        PCM_CHECK(count == highest, "count %u, /sys/devices/system/cpu/possible \"%s\" says %u",
                  count, text, highest);
        PCM_CHECK(pcm_os_possible_cpus() == count, "possible CPUs %u, count %u", pcm_os_possible_cpus(), count);
    } else {
        PCM_CHECK(pcm_os_possible_cpus() == 0, "possible CPUs %u without the file", pcm_os_possible_cpus());
        pcm_test_printf("  (no /sys/devices/system/cpu/possible: fallback count %u)\n", count);
    }
}

PCM_TEST(os_current_cpu)
{
    unsigned count = pcm_os_cpu_count();
    for (int i = 0; i < 100; i++) {
        int cpu = pcm_os_current_cpu();
        PCM_CHECK(cpu >= -1, "cpu %d", cpu);
        PCM_CHECK(cpu < 0 || (unsigned)cpu < count, "cpu %d of %u", cpu, count);
        if (cpu < 0) {
            pcm_test_printf("  (sched_getcpu unavailable here)\n");
            break;
        }
    }
}

/* ---- environment ---- */

PCM_TEST(os_getenv_from_environ)
{
    setenv("PCM_OS_TEST_VAR", "hello", 1);
    setenv("PCM_OS_TEST_EMPTY", "", 1);
    const char *v = pcm_os_getenv("PCM_OS_TEST_VAR");
    PCM_CHECK(v && strcmp(v, "hello") == 0, "got %s", v ? v : "NULL");
    PCM_CHECK(pcm_os_getenv("PCM_OS_TEST_VA") == NULL, "matched a prefix of the name");
    PCM_CHECK(pcm_os_getenv("PCM_OS_TEST_VARX") == NULL, "matched a longer name");
    v = pcm_os_getenv("PCM_OS_TEST_EMPTY");
    PCM_CHECK(v && *v == '\0', "empty value: %s", v ? "non-empty" : "NULL");
    PCM_CHECK(pcm_os_getenv("") == NULL, "empty name matched");
    setenv("PCM_OS_TEST_VAR", "changed", 1);
    v = pcm_os_getenv("PCM_OS_TEST_VAR");
    PCM_CHECK(v && strcmp(v, "changed") == 0, "setenv not seen: %s", v ? v : "NULL");
    unsetenv("PCM_OS_TEST_VAR");
    unsetenv("PCM_OS_TEST_EMPTY");
    PCM_CHECK(pcm_os_getenv("PCM_OS_TEST_VAR") == NULL, "unsetenv not seen");
}

/* The /proc/self/environ path, as before libc is initialised (environ
 * NULL): must find what the process started with. */
PCM_TEST(os_getenv_without_environ)
{
    static char text[16384];
    long len = read_whole("/proc/self/environ", text, sizeof text - 1);
    if (len <= 0) {
        pcm_test_printf("  (no /proc/self/environ: skipped)\n");
        return;
    }
    text[len] = '\0';
    /* The first entry with a name; compare what pcm_os_getenv returns. */
    char name[256];
    const char *eq = strchr(text, '=');
    PCM_REQUIRE(eq && eq > text && (size_t)(eq - text) < sizeof name, "odd environment");
    memcpy(name, text, (size_t)(eq - text));
    name[eq - text] = '\0';

    errno = 777;
    char **saved = environ;
    environ = NULL;
    const char *v = pcm_os_getenv(name);
    const char *missing = pcm_os_getenv("PCM_OS_TEST_SURELY_NOT_SET");
    environ = saved;
    PCM_CHECK(errno == 777, "errno changed to %d", errno);
    PCM_CHECK(v && strcmp(v, eq + 1) == 0, "%s: got %s, want %s", name, v ? v : "NULL", eq + 1);
    PCM_CHECK(missing == NULL, "found an unset variable");
}

/* Re-executed with a crafted environment, a child checks the 16 KiB
 * limit of the /proc fallback: entries wholly inside are found, one cut
 * by the limit is not (never a shortened value), later ones are not. */
#define CHILD_FLAG "PCM_OS_TEST_ENV_CHILD"

PCM_TEST(os_getenv_proc_truncation)
{
    if (pcm_test_getenv(CHILD_FLAG)) {
        char **saved = environ;
        environ = NULL;
        const char *first = pcm_os_getenv("PCM_FIRST");
        const char *cut = pcm_os_getenv("PCM_CUT");
        const char *last = pcm_os_getenv("PCM_LAST");
        environ = saved;
        PCM_CHECK(first && strcmp(first, "yes") == 0, "PCM_FIRST: %s", first ? first : "NULL");
        PCM_CHECK(cut == NULL, "PCM_CUT read as \"%s\" past the limit", cut ? cut : "");
        PCM_CHECK(last == NULL, "PCM_LAST found beyond the limit");
        return;
    }

    /* Lay out: flag, filter, PCM_FIRST, padding, then PCM_CUT straddling
     * byte 16384, then PCM_LAST.  Each entry takes strlen + 1 bytes. */
    static char padding[16384];
    static const char flag[] = CHILD_FLAG "=1";
    static const char filter[] = "PCM_TEST_FILTER=os_getenv_proc_truncation";
    static const char first[] = "PCM_FIRST=yes";
    static const char cut[] = "PCM_CUT=1234567890";
    size_t used = sizeof flag + sizeof filter + sizeof first; /* sizeof counts the NUL */
    /* PCM_CUT starts 12 bytes before the limit: "PCM_CUT=1234" lies inside,
     * so a reader that kept the cut entry would return "1234". */
    size_t pad_entry = 16384 - 12 - used;
    memcpy(padding, "PCM_PAD=", 8);
    memset(padding + 8, 'p', pad_entry - 1 - 8);
    padding[pad_entry - 1] = '\0';
    char *env[] = {(char *)flag, (char *)filter, (char *)first, padding, (char *)cut,
                   (char *)"PCM_LAST=1", NULL};
    char *argv[] = {(char *)"os_linux_child", NULL};

    /* Started through its dynamic loader (the i386 suite run natively,
     * qemu/run-tests.sh), this program's /proc/self/exe is the loader,
     * which would take the child's argv[0] for a program to run. */
    char self[PATH_MAX];
    ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (self_len > 0) {
        self[self_len] = '\0';
        const char *base = strrchr(self, '/');
        if (strncmp(base ? base + 1 : self, "ld-", 3) == 0) {
            pcm_test_printf("  (run through its loader %s: cannot re-execute this program: skipped)\n", self);
            return;
        }
    }

    /* posix_spawn, not fork: glibc's fork hangs in the child under
     * qemu-i386 7.2 (dynamically linked), while spawn works everywhere. */
    int out[2];
    PCM_REQUIRE(pipe(out) == 0, "pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    pid_t pid;
    int error = posix_spawn(&pid, "/proc/self/exe", &actions, NULL, argv, env);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (error) {
        close(out[0]);
        pcm_test_printf("  (cannot re-execute this program here, error %d: skipped)\n", error);
        return;
    }
    static char report[4096];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(out[0], report + len, sizeof report - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    report[len] = '\0';
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    /* 127: the exec failed in the child (qemu-user without binfmt_misc
     * cannot start a foreign binary). */
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        pcm_test_printf("  (cannot re-execute this program here: skipped)\n");
        return;
    }
    PCM_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(report, "1 passed"),
              "child status %d, its report:\n%s", status, report);
}
