/*
 * tests/stress/out_of_memory.c - every system call pcmalloc makes fails in
 * turn (src/os.h, pcm_os_fault_arm), and each failure must reach the
 * caller as NULL with errno == ENOMEM (posix_memalign: ENOMEM returned) or
 * be absorbed, crash nothing, lose no memory, and leave an allocator that
 * works again once the kernel says yes.
 *
 * The workload (workload() below) is single-threaded and deterministic:
 * the first allocation (which sets the allocator up), small objects of
 * every kind, enough of one class to need a second segment, large objects
 * plain, zeroed and over-aligned, realloc growing small to large and large
 * by mremap, shrinking, then everything freed and malloc_trim(0).  A dry
 * run counts the mmap, mremap and madvise calls it makes; then, for each
 * kind and each N up to that count, a fresh process (a fork of this one,
 * which never called pcmalloc, with PCMALLOC_CPUS=1 so every run uses the
 * same heap) runs it with the N-th call of that kind failing once, and
 * once more with every call from the N-th on failing.  After the faults
 * stop it frees everything, trims, and runs the workload again without
 * faults, which must succeed completely (the fault-free reference run
 * makes the same two runs, so both end alike).  Then:
 *   - no large mapping may be left (statistics: large objects and bytes
 *     back to 0),
 *   - no more segments than the fault-free reference run made (those in
 *     the heap, those in the segment pool and those unmapped: a run whose
 *     segment index could not be mapped pools and unmaps none),
 *   - the process's mappings no larger in all than the reference's at the
 *     same point: a mapping pcmalloc leaked is caught even if the
 *     statistics never knew of it.  The segment map's leaves are left out:
 *     they are kept for good, one per 512 MiB of address space ever used,
 *     and a failed attempt may have used other addresses.
 * A failed check names the kind, N, the mode and what went wrong; the
 * child's exit status carries the count to the parent.
 *
 * Known and excluded: a failure of the very first mapping (the per-CPU
 * heaps, at set-up) ends the process with "pcmalloc: cannot map ... per-
 * CPU heaps: out of memory" instead of returning NULL (init.h: set-up
 * cannot fail softly yet).  That case is checked to end exactly so.
 */
#include "harness.h"

#include "os.h"
#include "segment_map.h"
#include "pcmalloc.h"
#include "stats.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define SMALL_OBJECTS 24u   /* 24 x 256 KiB-class objects: more than one 4 MiB segment */
#define LIVE_MAX 64u
#define CHILD_WATCHDOG 60u

/* What a child reports to the parent through a shared page. */
struct report {
    unsigned long calls[3]; /* dry run: mmap, mremap, madvise */
    unsigned long segments; /* reference: segments after the workload, pooled and unmapped ones included */
    unsigned long vm_kib;   /* reference: KiB mapped at the end (mapped_kib) */
    unsigned long failures_seen; /* NULLs the faulty run got */
};

static struct report *shared_report(void)
{
    static struct report *page;
    if (!page) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        page = p == MAP_FAILED ? NULL : p;
    }
    return page;
}

/* ---- the workload ---- */

struct run {
    const char *what; /* "mmap N=3 once", for messages */
    unsigned errors;  /* failed checks */
    unsigned long nulls;
    void *live[LIVE_MAX];
    unsigned live_count;
};

static void complain(struct run *run, const char *fmt, const char *detail, size_t size, int err)
{
    run->errors++;
    pcm_test_printf("    %s: ", run->what);
    pcm_test_printf(fmt, detail, size, err);
    pcm_test_printf("\n");
}

static void keep(struct run *run, void *p)
{
    if (p && run->live_count < LIVE_MAX)
        run->live[run->live_count++] = p;
    else if (p)
        pcm_free(p);
}

static void fill(void *p, size_t size, unsigned char byte)
{
    memset(p, byte, size);
}

static bool holds(const void *p, size_t size, unsigned char byte)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < size; i++)
        if (c[i] != byte)
            return false;
    return true;
}

/* An allocation's outcome: a usable object, or NULL with ENOMEM. */
static void *check_result(struct run *run, const char *call, void *p, size_t size, int err)
{
    if (!p) {
        run->nulls++;
        if (err != ENOMEM)
            complain(run, "%s(%zu) returned NULL with errno %d, not ENOMEM", call, size, err);
        return NULL;
    }
    if ((uintptr_t)p % 16) {
        complain(run, "%s(%zu) returned a pointer not 16-aligned (errno %d)", call, size, err);
        return NULL;
    }
    if (pcm_malloc_usable_size(p) < size)
        complain(run, "%s(%zu): usable size too small (errno %d)", call, size, err);
    fill(p, size, 0xa5);
    return p;
}

static void *try_malloc(struct run *run, size_t size)
{
    errno = 0;
    void *p = pcm_malloc(size);
    return check_result(run, "malloc", p, size, errno);
}

/* realloc: on success the old contents moved, on failure the old object
 * is intact and still ours.  Returns the object; *size becomes its size. */
static void *try_realloc(struct run *run, void *p, size_t *size_inout, size_t size)
{
    size_t old_size = *size_inout;
    fill(p, old_size, 0x3c);
    errno = 0;
    void *q = pcm_realloc(p, size);
    int err = errno;
    if (!q) {
        run->nulls++;
        if (err != ENOMEM)
            complain(run, "%s(%zu) returned NULL with errno %d, not ENOMEM", "realloc", size, err);
        if (!holds(p, old_size, 0x3c))
            complain(run, "%s(%zu) failed and damaged the old object (errno %d)", "realloc", size, err);
        return p;
    }
    *size_inout = size;
    size_t kept = old_size < size ? old_size : size;
    if (!holds(q, kept, 0x3c))
        complain(run, "%s(%zu) lost the old contents (errno %d)", "realloc", size, err);
    if (pcm_malloc_usable_size(q) < size)
        complain(run, "%s(%zu): usable size too small (errno %d)", "realloc", size, err);
    return q;
}

static void workload(struct run *run)
{
    /* Small objects of several classes, and aligned ones. */
    static const size_t small_sizes[] = {1, 16, 24, 100, 1000, 5000, 40000};
    for (unsigned i = 0; i < sizeof small_sizes / sizeof small_sizes[0]; i++)
        keep(run, try_malloc(run, small_sizes[i]));
    errno = 0;
    void *z = pcm_calloc(10, 100);
    int err = errno;
    keep(run, check_result(run, "calloc", z, 1000, err));
    errno = 0;
    void *a = pcm_aligned_alloc(4096, 100);
    keep(run, check_result(run, "aligned_alloc", a, 100, errno));
    void *pm = NULL;
    int rc = pcm_posix_memalign(&pm, 256, 300);
    if (rc) {
        run->nulls++;
        if (rc != ENOMEM)
            complain(run, "%s(%zu) returned %d, not ENOMEM", "posix_memalign", 300, rc);
    } else {
        keep(run, check_result(run, "posix_memalign", pm, 300, 0));
    }

    /* Enough of the largest small class to need a second segment. */
    void *big_small[SMALL_OBJECTS];
    for (unsigned i = 0; i < SMALL_OBJECTS; i++)
        big_small[i] = try_malloc(run, 250 * 1024);

    /* Large objects: plain, zeroed, over-aligned. */
    keep(run, try_malloc(run, 1u << 20));
    errno = 0;
    size_t zbytes = (size_t)2 << 20;
    void *zl = pcm_calloc(1, zbytes);
    err = errno;
    if (zl && !holds(zl, zbytes, 0))
        complain(run, "%s(%zu) is not zeroed (errno %d)", "calloc", zbytes, err);
    keep(run, check_result(run, "calloc", zl, zbytes, err));
    errno = 0;
    void *over = pcm_memalign((size_t)8 << 20, 5000);
    keep(run, check_result(run, "memalign", over, 5000, errno));

    /* realloc: small to large, large growing by mremap, then shrinking. */
    void *r = try_malloc(run, 3000);
    if (r) {
        size_t size = 3000;
        static const size_t steps[] = {200000, 600000, 3u << 20, 9u << 20, 20000, 100};
        for (unsigned i = 0; i < sizeof steps / sizeof steps[0]; i++)
            r = try_realloc(run, r, &size, steps[i]);
        keep(run, r);
    }
    for (unsigned i = 0; i < SMALL_OBJECTS; i++)
        pcm_free(big_small[i]);
}

static void release_all(struct run *run)
{
    for (unsigned i = 0; i < run->live_count; i++)
        pcm_free(run->live[i]);
    run->live_count = 0;
    pcm_malloc_trim(0);
}

/* KiB of address space in this process's mappings, as /proc/self/maps
 * lists them, leaving out the brk heap and the stack (the C library's and
 * the kernel's to grow).  Not VmSize: under qemu-user that is the
 * emulator's own, while qemu answers /proc/self/maps for the guest. */
static unsigned long mapped_kib(void)
{
    static char text[256 * 1024];
    pcm_test_read_file("/proc/self/maps", text, sizeof text);
    unsigned long total = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        char *dash;
        unsigned long long from = strtoull(line, &dash, 16), to = *dash == '-' ? strtoull(dash + 1, NULL, 16) : from;
        if (!strstr(line, "[heap]") && !strstr(line, "[stack]"))
            total += (unsigned long)((to - from) >> 10);
        if (!end)
            break;
        line = end + 1;
    }
    return total;
}

/* KiB in the segment map's leaves: mapped on first use for each 512 MiB
 * of address space and kept for good (segment_map.h), so a run whose
 * failed attempts touched other addresses has more of them, by design. */
static unsigned long segment_map_leaves_kib(void)
{
    unsigned long kib = 0;
#if PCM_MAP_LEAF_BITS > 0
    for (size_t i = 0; i < (size_t)1 << PCM_MAP_TOP_BITS; i++)
        if (pcm_segment_map_top[i])
            kib += (unsigned long)((sizeof(pcm_word_t) << PCM_MAP_LEAF_BITS) >> 10);
#endif
    return kib;
}

/* ---- the children ---- */

enum mode { DRY_RUN, REFERENCE, FAIL_ONCE, FAIL_FROM };

struct plan {
    enum mode mode;
    unsigned kind; /* enum pcm_os_call */
    long n;
    char what[64];
};

static const char *kind_name(unsigned kind)
{
    return kind == PCM_OS_CALL_MMAP ? "mmap" : kind == PCM_OS_CALL_MREMAP ? "mremap" : kind == PCM_OS_CALL_MADVISE ? "madvise" : "any";
}

/* The child's whole life; returns its exit status (failed checks). */
static int child(const struct plan *plan)
{
    struct report *report = shared_report();
    struct run run;
    memset(&run, 0, sizeof run);
    run.what = plan->what;
    if (plan->mode == DRY_RUN)
        pcm_os_fault_arm(PCM_OS_CALL_ANY, __LONG_MAX__, false);
    else if (plan->mode != REFERENCE)
        pcm_os_fault_arm(plan->kind, plan->n, plan->mode == FAIL_FROM);

    workload(&run);
    unsigned long calls[3] = {pcm_os_fault_seen(PCM_OS_CALL_MMAP), pcm_os_fault_seen(PCM_OS_CALL_MREMAP),
                              pcm_os_fault_seen(PCM_OS_CALL_MADVISE)};
    pcm_os_fault_disarm();
    release_all(&run);
    if (plan->mode == DRY_RUN) {
        memcpy(report->calls, calls, sizeof calls);
        return (int)run.errors + (run.nulls ? 1 : 0);
    }
    report->failures_seen = run.nulls;
    if (plan->mode == REFERENCE && run.nulls) {
        run.errors++;
        pcm_test_printf("    reference run: %lu allocations failed without faults\n", run.nulls);
    }
    {
        /* The faults have stopped: everything must work again.  (The
         * reference makes this second run too, so the two end alike.) */
        struct run again;
        memset(&again, 0, sizeof again);
        again.what = plan->what;
        workload(&again);
        release_all(&again);
        if (again.nulls) {
            run.errors++;
            pcm_test_printf("    %s: after the faults stopped, %lu allocations still failed\n", plan->what,
                            again.nulls);
        }
        run.errors += again.errors;
    }
    struct pcm_stats_totals t;
    pcm_stats_totals_read(&t);
    unsigned long vm = mapped_kib() - segment_map_leaves_kib();
    if (plan->mode == REFERENCE) {
        report->segments = t.segments + t.pooled_chunks + t.unmapped_segments;
        report->vm_kib = vm;
    } else {
        if (t.large_objects || t.large_bytes) {
            run.errors++;
            pcm_test_printf("    %s: %lu large mappings (%lu bytes) left after freeing everything and trimming\n",
                            plan->what, (unsigned long)t.large_objects, (unsigned long)t.large_bytes);
        }
        if (t.segments + t.pooled_chunks + t.unmapped_segments > report->segments) {
            run.errors++;
            pcm_test_printf("    %s: %lu segments, the reference run needed %lu\n", plan->what,
                            (unsigned long)(t.segments + t.pooled_chunks + t.unmapped_segments), report->segments);
        }
        if (vm > report->vm_kib) {
            run.errors++;
            pcm_test_printf("    %s: address space %lu KiB, the reference ends with %lu KiB: a leaked mapping\n",
                            plan->what, vm, report->vm_kib);
        }
    }
    return run.errors > 100 ? 100 : (int)run.errors;
}

static int run_plan(void *arg)
{
    setenv("PCMALLOC_CPUS", "1", 1); /* one heap: every run alike */
    return child(arg);
}

static struct pcm_test_child run_child(const struct plan *plan)
{
    return pcm_test_run_child(run_plan, (void *)plan, CHILD_WATCHDOG);
}

static const char init_failure[] = "pcmalloc: cannot map ";
static unsigned set_up_aborts; /* runs that ended in the known set-up abort */

/* One faulty run; false if it failed. */
static bool sweep_one(enum mode mode, unsigned kind, long n, unsigned long *nulls)
{
    struct plan plan = {mode, kind, n, ""};
    snprintf(plan.what, sizeof plan.what, "%s call %ld fails%s", kind_name(kind), n,
             mode == FAIL_FROM ? ", and every later one" : " once");
    struct pcm_test_child out = run_child(&plan);
    if (!out.ran) {
        PCM_CHECK(out.ran, "%s: could not run the child", plan.what);
        return false;
    }
    /* The one known hard failure: the first mapping, at set-up. */
    if (kind & PCM_OS_CALL_MMAP && n == 1 && out.signaled && out.signal == SIGABRT &&
        strncmp(out.text, init_failure, sizeof init_failure - 1) == 0) {
        set_up_aborts++;
        return true;
    }
    PCM_CHECK(!out.signaled && out.exit_status == 0, "%s: the child %s %d (stderr: \"%s\")", plan.what,
              out.signaled ? "died of signal" : "found failures:", out.signaled ? out.signal : out.exit_status,
              out.text);
    *nulls += shared_report()->failures_seen;
    return !out.signaled && out.exit_status == 0;
}

PCM_TEST(out_of_memory_every_system_call_fails_in_turn)
{
    PCM_REQUIRE(shared_report(), "cannot map the report page");
    struct plan dry = {DRY_RUN, PCM_OS_CALL_ANY, 0, "dry run"};
    struct pcm_test_child out = run_child(&dry);
    PCM_REQUIRE(out.ran && !out.signaled && out.exit_status == 0,
                "the workload fails without faults: status %d, \"%s\"", out.exit_status, out.text);
    struct plan reference = {REFERENCE, PCM_OS_CALL_ANY, 0, "reference run"};
    out = run_child(&reference);
    PCM_REQUIRE(out.ran && !out.signaled && out.exit_status == 0, "the reference run failed: status %d",
                out.exit_status);
    unsigned long calls[3];
    memcpy(calls, shared_report()->calls, sizeof calls);
    pcm_test_printf("  the workload makes %lu mmap, %lu mremap, %lu madvise calls; reference: %lu segments, "
                    "%lu KiB of address space\n",
                    calls[0], calls[1], calls[2], shared_report()->segments, shared_report()->vm_kib);
    PCM_CHECK(calls[0] >= 4 && calls[1] >= 1, "the workload should make mmap and mremap calls: %lu, %lu",
              calls[0], calls[1]);

    static const unsigned kinds[3] = {PCM_OS_CALL_MMAP, PCM_OS_CALL_MREMAP, PCM_OS_CALL_MADVISE};
    unsigned runs = 0, failed = 0;
    unsigned long nulls = 0;
    for (unsigned k = 0; k < 3; k++) {
        /* One past the count: a fault that never comes must change nothing. */
        for (long n = 1; n <= (long)calls[k] + 1; n++) {
            for (int mode = FAIL_ONCE; mode <= FAIL_FROM; mode++) {
                runs++;
                if (!sweep_one((enum mode)mode, kinds[k], n, &nulls))
                    failed++;
                if (failed >= 10)
                    return; /* enough to go on with */
            }
        }
    }
    pcm_test_printf("  %u faulty runs, %u failed; %lu allocations answered NULL + ENOMEM; %u ended in the known "
                    "set-up abort\n",
                    runs, failed, nulls, set_up_aborts);
}
