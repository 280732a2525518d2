/*
 * tests/stress/fault_detected.c - proof that the stress tests can fail:
 * with a deliberately broken allocator, the pattern check (pattern.h, the
 * one random_sizes.c and producer_consumer.c use) must report corruption.
 *
 * The fault: while pcm_fault_duplicate_refill is non-zero, every refill of
 * a per-CPU cache hands its first object out twice (heap.h).  A small
 * single-threaded stress allocates objects of 16 to 64 bytes (four size
 * classes), fills each with a pattern unique to it and checks every live
 * object after each allocation.  With a batch of at most 64 objects per
 * refill, one of the four classes is refilled a second time by the 257th
 * allocation, so the duplicate must be caught by then: its second owner's
 * fill overwrites the first owner's pattern.
 *
 * The broken run happens in a forked child: once an object is handed out
 * twice, the cache it sits in is corrupt (the owner's pattern overwrote
 * its link word), and the next allocation of that class would follow a
 * garbage pointer.  The child stops at the first corruption it finds,
 * clears the fault switch, and reports by its exit status; the parent's
 * allocator is never broken.  The same stress without the fault must find
 * nothing (so the check is not simply always failing).
 */
#include "harness.h"

#include "heap.h"
#include "pcmalloc.h"

#include "pattern.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define OBJECTS 257u /* 4 classes x 64 (the largest batch) + 1 */
#define MIN_SIZE 16u /* a 16-byte pattern cannot match by chance */
#define MAX_SIZE 64u

enum child_status {
    FOUND_CORRUPTION = 10,
    FOUND_NOTHING = 11,
    MALLOC_FAILED = 12,
};

struct object {
    void *p;
    size_t size;
};

/* Allocate and fill OBJECTS objects, checking all live ones after each
 * allocation; stop at the first corrupt one. */
static enum child_status small_stress(uint64_t seed)
{
    static struct object objects[OBJECTS];
    uint64_t rng = seed | 1;
    for (unsigned i = 0; i < OBJECTS; i++) {
        size_t size = MIN_SIZE + (size_t)(pcm_test_rand(&rng) % (MAX_SIZE - MIN_SIZE + 1));
        void *p = pcm_malloc(size);
        if (!p)
            return MALLOC_FAILED;
        objects[i].p = p;
        objects[i].size = size;
        pcm_pattern_fill(p, size, i + 1); /* tag: the allocation's number */
        for (unsigned k = 0; k <= i; k++) {
            size_t bad = pcm_pattern_check(objects[k].p, objects[k].size, k + 1);
            if (bad != PCM_PATTERN_OK) {
                pcm_test_printf("  corruption found: object %u (%p, %zu bytes) byte %zu changed after "
                                "allocation %u returned %p\n",
                                k, objects[k].p, objects[k].size, bad, i, p);
                return FOUND_CORRUPTION;
            }
        }
    }
    return FOUND_NOTHING;
}

/* The count of 257 allocations holds for one heap's caches.  On a machine
 * with several CPUs the child may migrate mid-run and spread its
 * allocations over several heaps, none of which then reaches its second
 * refill (seen in the 4-CPU VMs of qemu/run-vm.sh): pin it to the CPU it
 * is on. */
static void stay_on_this_cpu(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* Run small_stress in a child with the fault switch as given; its exit
 * status, or -1 - signal if it died. */
static int run_child(int fault)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1000;
    if (pid == 0) {
        stay_on_this_cpu();
        pcm_fault_duplicate_refill = fault;
        enum child_status status = small_stress(pcm_test_seed());
        pcm_fault_duplicate_refill = 0; /* off again before anything else */
        _exit(status);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1000;
    if (WIFSIGNALED(status))
        return -WTERMSIG(status);
    return WEXITSTATUS(status);
}

PCM_TEST(fault_duplicate_refill_is_detected)
{
    int status = run_child(1);
    PCM_CHECK(status != -1000, "fork or waitpid failed");
#ifdef PCM_HARDENED
    /* The hardened build catches the duplicate itself, before the pattern
     * check can: a free bit or a link check aborts the child. */
    if (status == -SIGABRT) {
        pcm_test_printf("  the hardened build aborted the child on the duplicate (SIGABRT)\n");
        return;
    }
#endif
    PCM_CHECK(status == FOUND_CORRUPTION,
              "with every refill handing an object out twice, the pattern check %s (status %d)",
              status == FOUND_NOTHING   ? "found nothing"
              : status == MALLOC_FAILED ? "did not run: malloc failed"
              : status < 0              ? "did not run: the child died of a signal"
                                        : "did not finish",
              status);
    PCM_CHECK(pcm_fault_duplicate_refill == 0, "the fault switch is on in the parent");
}

PCM_TEST(fault_free_allocator_passes_the_same_check)
{
    int status = run_child(0);
    PCM_CHECK(status == FOUND_NOTHING, "the healthy allocator failed the small stress (status %d)", status);
}
