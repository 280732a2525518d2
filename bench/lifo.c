/*
 * bench/lifo.c - motivating workload 4: threads sharing one lock-free LIFO.
 * Each thread repeatedly draws k in 1..kmax and, on a coin flip, either
 * mallocs k objects of random size and pushes them, or pops up to k objects
 * and frees them. Almost every free is of an object another thread
 * allocated, and under oversubscription or `taskset -c 0` any allocator
 * lock is held by a preempted thread sooner or later.
 *
 * The stack's links live in cells of an array this program maps and never
 * frees; each cell points at its malloc'ed object. A popper may read the
 * next field of a cell a rival has just popped (the classic Treiber-stack
 * race): on a cell that is harmless, whereas the next field of a freed
 * object may have been unmapped by the allocator. The head is (cell index,
 * tag) in one 64-bit word and every change bumps the tag, so a stale head
 * fails its compare-and-swap (no ABA).
 *
 * A popped cell joins the popper's own free chain; a pusher takes from its
 * own chain, else a fresh cell from its own slice of the array, sized for
 * every push it could make. So a push never fails, the set of objects made
 * is fixed by the arguments, and the checksum (a sum over every object
 * freed, by the threads or by the final drain) is the same under every
 * allocator and every schedule.
 *
 *   lifo threads=T draws=D kmax=K min=16 max=512
 * prints objects made (and freed) per second of the threaded phase; the
 * final drain of what is left on the stack is not timed.
 */
#include <stdatomic.h>
#include <sys/mman.h>

#include "bench.h"

#define NO_CELL UINT32_MAX

struct cell {
    /* Atomic because a stale popper may read it while the cell's new
     * holder writes it; the value it reads is then discarded by the
     * failing compare-and-swap. */
    _Atomic uint32_t next;
    /* Written before the releasing push, read after the acquiring pop. */
    void *object;
};

/* (tag << 32) | index of the top cell, NO_CELL when empty. */
static _Atomic uint64_t stack_head = NO_CELL;
static struct cell *cells;

static inline uint64_t pack(uint32_t index, uint64_t old)
{
    return ((old >> 32) + 1) << 32 | index;
}

static void push(uint32_t c)
{
    uint64_t old = atomic_load_explicit(&stack_head, memory_order_relaxed);
    do
        atomic_store_explicit(&cells[c].next, (uint32_t)old, memory_order_relaxed);
    /* Release: whoever pops c must see c.object and c.next. */
    while (!atomic_compare_exchange_weak_explicit(&stack_head, &old, pack(c, old),
                                                  memory_order_release, memory_order_relaxed));
}

static uint32_t pop(void)
{
    /* Acquire on the load and on a failed CAS: the next field read below
     * must be the one its pusher published. Every write to the head is a
     * read-modify-write, so the release sequence of that push reaches us. */
    uint64_t old = atomic_load_explicit(&stack_head, memory_order_acquire);
    for (;;) {
        uint32_t top = (uint32_t)old;
        if (top == NO_CELL)
            return NO_CELL;
        uint32_t next = atomic_load_explicit(&cells[top].next, memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(&stack_head, &old, pack(next, old),
                                                  memory_order_acquire, memory_order_acquire))
            return top;
    }
}

struct worker {
    _Alignas(64) uint32_t free_chain; /* cells this thread holds, linked by next */
    uint32_t fresh;                   /* next never-used cell of its slice */
    uint32_t fresh_end;
    uint64_t made;
    uint64_t checksum;
};

static struct worker workers[256];
static long draws_total, kmax, min_size, max_size;
static int thread_count;

static uint32_t take_cell(struct worker *w)
{
    uint32_t c = w->free_chain;
    if (c != NO_CELL) {
        w->free_chain = atomic_load_explicit(&cells[c].next, memory_order_relaxed);
        return c;
    }
    if (w->fresh == w->fresh_end)
        bench_fail("cell slice exhausted (a bug in the benchmark)");
    return w->fresh++;
}

static void give_cell(struct worker *w, uint32_t c)
{
    atomic_store_explicit(&cells[c].next, w->free_chain, memory_order_relaxed);
    w->free_chain = c;
}

static long draws_of(int index)
{
    return draws_total / thread_count + (index < draws_total % thread_count);
}

static void work(int index, void *unused)
{
    (void)unused;
    struct worker *w = &workers[index];
    bench_rng rng = bench_seed((uint64_t)index + 1000);
    uint64_t sequence = 0;
    for (long d = draws_of(index); d > 0; d--) {
        long k = (long)bench_between(&rng, 1, (uint64_t)kmax);
        if (bench_below(&rng, 2)) {
            for (long j = 0; j < k; j++) {
                size_t size = (size_t)bench_between(&rng, (uint64_t)min_size, (uint64_t)max_size);
                void *p = bench_check_alloc(malloc(size), size);
                bench_stamp(p, size, (uint64_t)index << 40 | sequence++);
                uint32_t c = take_cell(w);
                cells[c].object = p;
                push(c);
            }
            w->made += (uint64_t)k;
        } else {
            for (long j = 0; j < k; j++) {
                uint32_t c = pop();
                if (c == NO_CELL)
                    break;
                void *p = cells[c].object;
                give_cell(w, c);
                w->checksum += bench_verify(p, (size_t)max_size);
                free(p);
            }
        }
    }
}

int main(int argc, char **argv)
{
    thread_count = (int)bench_arg(argc, argv, "threads", 4);
    draws_total = bench_arg(argc, argv, "draws", 2500000);
    kmax = bench_arg(argc, argv, "kmax", 32);
    min_size = bench_arg(argc, argv, "min", 16);
    max_size = bench_arg(argc, argv, "max", 512);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || draws_total < 1 || kmax < 1 ||
        min_size < BENCH_STAMP_MIN || max_size < min_size)
        bench_fail("need 1 <= threads <= 256, draws >= 1, kmax >= 1, 16 <= min <= max");

    /* Each thread's slice holds every cell it could push. Mapped, not
     * malloc'ed, and lazily touched: only cells in use count in the RSS. */
    uint64_t total_cells = 0;
    for (int i = 0; i < thread_count; i++) {
        workers[i].free_chain = NO_CELL;
        workers[i].fresh = (uint32_t)total_cells;
        total_cells += (uint64_t)draws_of(i) * (uint64_t)kmax;
        if (total_cells >= NO_CELL)
            bench_fail("draws * kmax is too large for 32-bit cell indexes");
        workers[i].fresh_end = (uint32_t)total_cells;
    }
    cells = mmap(NULL, total_cells * sizeof *cells, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (cells == MAP_FAILED)
        bench_fail("mmap of %" PRIu64 " cells failed", total_cells);

    double elapsed = bench_run_threads(thread_count, work, NULL);

    uint64_t made = 0, checksum = 0;
    for (int i = 0; i < thread_count; i++) {
        made += workers[i].made;
        checksum += workers[i].checksum;
    }
    for (uint32_t c; (c = pop()) != NO_CELL;) {
        checksum += bench_verify(cells[c].object, (size_t)max_size);
        free(cells[c].object);
    }
    bench_report_throughput((double)made, elapsed, "objects/s", checksum);
    return 0;
}
