/*
 * arch/x86_64/arch_rseq.h - the per-CPU cache operations as restartable
 * sequences, in x86_64 assembly (the contract is in src/percpu_rseq.h).
 *
 * Each section is the same shape:
 *   0. a descriptor { version 0, flags 0, start 1f, length 2f - 1f,
 *      abort 4f } in section __rseq_cs, 32-byte aligned as the ABI asks;
 *   1. the thread's rseq area (%fs:off) gets the descriptor's address in
 *      rseq_cs - from here on the kernel checks, on every preemption,
 *      migration and signal, whether the thread stopped between 1: and 2:
 *      and if so resumes it at 4: instead;
 *   2. cpu_id is read and the CPU's slot found: slot0 + cpu * stride
 *      (a shift: the stride, a heap's size, is a power of two), added up
 *      into one register before any access: the slot's loads and commit
 *      store name a base register alone.  With base + index operands a
 *      run of pops (each loads the slot the one before stored) took 9.1
 *      TSC ticks a pop against 5.0, on a Xeon of family 6 model 167
 *      (2026-12-05, a copy of the section in a test program, pinned):
 *      the core's forwarding from a store to the load of the same
 *      address seems to need the simpler form.  threadtest ran 1.27
 *      times as fast with it, larson at one thread 0.96 (make bench);
 *   3. plain loads, and writes only to objects the caller owns, then ONE
 *      committing store to the slot, the last instruction before 2:.
 * Why a restart is safe at every instruction: before the commit, nothing
 * another thread can see has changed (the objects written are the
 * caller's own until the commit publishes them, and rewriting them on the
 * next try writes the same words); after it, the section is complete.
 * Only threads running on a CPU touch that CPU's slot, and only through
 * these sections, so no other writer can interleave - the kernel's abort
 * stands in for the lock prefix.
 *
 * The abort handler sits in section __rseq_failure behind the 4-byte
 * signature glibc registered (RSEQ_SIG 0x53053053), which the kernel
 * checks before jumping there; the bytes 0f b9 3d make the signature the
 * operand of a ud1, so a disassembler (and the instruction audit) reads
 * a whole instruction.  The kernel clears rseq_cs when it aborts, so the
 * handler leaves the section through C, which starts it again from 1.
 * Labels are numeric and local, so each inlined copy gets its own
 * descriptor.  No locked instruction anywhere in here.
 *
 * An empty list's slot holds its own address, not 0, and the bottom
 * object of a list links there (the define below; heap.h, pcm_chain_more):
 * the slot's register is at hand for the pop's compare, and the push
 * reads the top's depth with no test for an empty list - the slot's
 * second word, the pair's tag half, unused on this path, reads 0.  Three
 * instructions fewer a free, 43 (2026-12-05, pinned, medians of 5: 1000
 * frees of 64 bytes in a row 7.37 -> 7.23 TSC ticks each, 100 in a row
 * 7.99 -> 7.53; callgrind's malloc+free pair 67 -> 64).
 */
#define PCM_ARCH_RSEQ_LISTS_END_AT_SLOT 1
#ifndef PCM_PERCPU_RSEQ_INSIDE
#error "include src/percpu_rseq.h, not an arch module's header"
#endif
#ifndef __x86_64__
#error "arch/x86_64 built for another architecture"
#endif

#define PCM_ARCH_RSEQ 1

_Static_assert(RSEQ_SIG == 0x53053053, "the signature below is glibc's RSEQ_SIG");

#define PCM_RSEQ_DESCRIPTOR                                                                     \
    ".pushsection __rseq_cs, \"aw\"\n\t"                                                        \
    ".balign 32\n\t"                                                                            \
    "3: .long 0, 0\n\t"                                                                         \
    ".quad 1f, 2f - 1f, 4f\n\t"                                                                 \
    ".popsection\n\t"                                                                           \
    "leaq 3b(%%rip), %%rax\n\t"                                                                 \
    "movq %%rax, %%fs:8(%[off])\n\t" /* area->rseq_cs = &descriptor */

#define PCM_RSEQ_SIGNATURE ".byte 0x0f, 0xb9, 0x3d\n\t.long 0x53053053\n\t"

/*
 * C:  cpu = area->cpu_id;            (signed: -1 or -2 without a number)
 *     if (the slot's bin's limit == 0) goto empty;
 *                   (stopped: a drain; or heap -1 or -2, which lie below
 *                    heap 0 unwritten, heap.h PCM_HEAP_GUARDS)
 *     obj = slot0[cpu * stride];
 *     if (obj == &slot0[cpu * stride]) goto empty;
 *     slot0[cpu * stride] = obj->next;                  <- commit
 *     (abort: goto aborted)
 * No compare of cpu with the number of heaps: the rseq path runs only
 * with a heap for every possible CPU number (fast_path.c), and a thread
 * without one reads a guard's limit of 0.  Every jump to `empty` has obj
 * 0 in its register (both ways zero it out of line, at 5:): gcc
 * 12 compiled pop_any's "empty: return EMPTY" into "return obj" on a jump
 * from an asm goto to a label, as if the output were set there.  obj is
 * in rax, where malloc returns it.
 */
#define pcm_arch_rseq_pop(obj_, slot0_, off_, empty, aborted)                                   \
    __asm__ goto(PCM_RSEQ_DESCRIPTOR                                                            \
                 "1:\n\t"                                                                       \
                 "movslq %%fs:4(%[off]), %%rcx\n\t" /* cpu_id, sign-extended */                 \
                 "shlq %[shift], %%rcx\n\t"                                                     \
                 "addq %[slot], %%rcx\n\t" /* the slot, in one register (step 2 above) */      \
                 "cmpl $0, %c[limit](%%rcx)\n\t" /* stopped, or a guard: empty */               \
                 "je 5f\n\t"                                                                    \
                 "movq (%%rcx), %[obj]\n\t"                                                     \
                 "cmpq %%rcx, %[obj]\n\t" /* the slot's own address: empty */                  \
                 "je 5f\n\t"                                                                    \
                 "movq (%[obj]), %%rdx\n\t"                                                     \
                 "movq %%rdx, (%%rcx)\n\t" /* commit */                                         \
                 "2:\n\t"                                                                       \
                 ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE                   \
                 "4: jmp %l[" #aborted "]\n\t"                                                  \
                 "5: xorl %k[obj], %k[obj]\n\t"                                                 \
                 "jmp %l[" #empty "]\n\t"                                                       \
                 ".popsection\n\t"                                                              \
                 : [obj] "=&a"(obj_) /* (PCM_RSEQ_DESCRIPTOR's rax, before obj) */              \
                 : [slot] "r"(slot0_), [off] "r"(off_), [limit] "i"(PCM_RSEQ_LIMIT_OFFSET),     \
                   [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)                                           \
                 : "rcx", "rdx", "memory", "cc"                                                 \
                 : empty, aborted)

/*
 * C:  cpu = area->cpu_id;
 *     if (cpu != owner) goto other_cpu;       (also: no rseq, cpu_id < 0)
 *       (push_here: if (cpu >= *cpus) goto no_cpu;  the same, then)
 *     top = slot0[cpu * stride];
 *     depth = top->word1 & PCM_DEPTH_MASK;     (top == the slot: 0)
 *       (push_here: depth = top ? that : 0;  a heap not ready: slot 0)
 *     if (depth >= the slot's bin's limit) goto full;
 *     obj->next = top;  obj->word1 = mark + depth + 1;   (obj is ours)
 *     slot0[cpu * stride] = obj;                         <- commit
 *     (abort: goto aborted)
 * mark is pcm_free_mark(obj): its low PCM_DEPTH_BITS are 0, so + is |.
 * The slot's address comes from cpu_id, even for push, which knows whose
 * slot it wants: a build whose spans named their owner's slot (a shift
 * fewer) ran larson at 2 threads 8 % slower (76.7 against 83.4 M/s,
 * medians of 21 interleaved runs; 4 and 8 threads 5 %).  The likely cause,
 * not measured (no counters here): with the address known before cpu_id,
 * a free that mispredicts its owner check reads the owner CPU's slot line
 * speculatively, and takes it from the CPU that writes it.  From cpu_id, a
 * wrong guess only ever touches this CPU's own line.
 */
#define pcm_arch_rseq_push_if(compare_, jump_, depth_, who_, slot0_, off_, obj_, mark_, miss, full, aborted) \
    __asm__ goto(PCM_RSEQ_DESCRIPTOR                                                            \
                 "1:\n\t"                                                                       \
                 "movl %%fs:4(%[off]), %%eax\n\t"                                               \
                 compare_ "\n\t"                                                                \
                 jump_ " %l[" #miss "]\n\t"                                                     \
                 "shlq %[shift], %%rax\n\t"                                                     \
                 "addq %[slot], %%rax\n\t"                                                      \
                 "movq (%%rax), %%rcx\n\t"                                                      \
                 depth_ /* the top's depth into edx */                                          \
                 "cmpl %c[limit](%%rax), %%edx\n\t" /* a heap not yet ready: 0 */               \
                 "jae %l[" #full "]\n\t"                                                        \
                 "movq %%rcx, (%[object])\n\t"                                                  \
                 "leaq 1(%%rdx, %[mark]), %%rdx\n\t"                                            \
                 "movq %%rdx, 8(%[object])\n\t"                                                 \
                 "movq %[object], (%%rax)\n\t" /* commit */                                     \
                 "2:\n\t"                                                                       \
                 ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE                   \
                 "4: jmp %l[" #aborted "]\n\t"                                                  \
                 ".popsection\n\t"                                                              \
                 :                                                                              \
                 : [slot] "r"(slot0_), [off] "r"(off_), [who] "rm"(who_), [object] "r"(obj_),   \
                   [mark] "r"(mark_), [limit] "i"(PCM_RSEQ_LIMIT_OFFSET),                       \
                   [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)                                           \
                 : "rax", "rcx", "rdx", "memory", "cc"                                          \
                 : miss, full, aborted)
/* The two checks of the CPU: it is `owner` (else goto other_cpu), or it is
 * any CPU below *cpus (else goto no_cpu).  The owner, a heap index of 16
 * bits (a span descriptor's field: free's compare reads it there, with no
 * load of its own), meets the low 16 bits of cpu_id: a CPU number past
 * 65535 would have no heap (rseq needs one a CPU: below PCM_HEAPS_MAX),
 * and the two negative ones (-1, -2) read 0xffff and 0xfffe there, which
 * no heap index is. */
_Static_assert(PCM_HEAPS_MAX < 0xfffeu, "a heap index never looks like a negative cpu_id's low 16 bits");
/* The top's depth (PCM_DEPTH_BITS == 16): on the owner's CPU the slot is
 * never 0 - its heap is ready, and an empty list there is its own
 * address, whose word 1 (the pair's unused tag half) reads 0 - so its
 * word 1 is read with no test; push_here's CPU may have a heap never made
 * ready, its slot 0. */
#define PCM_RSEQ_TOP_DEPTH "movzwl 8(%%rcx), %%edx\n\t"
#define PCM_RSEQ_TOP_DEPTH_OR_0 "xorl %%edx, %%edx\n\ttestq %%rcx, %%rcx\n\tjz 7f\n\t" PCM_RSEQ_TOP_DEPTH "7:\n\t"
#define pcm_arch_rseq_push(slot0_, off_, owner_, obj_, mark_, other_cpu, full, aborted)         \
    pcm_arch_rseq_push_if("cmpw %w[who], %%ax", "jne", PCM_RSEQ_TOP_DEPTH, (uint16_t)(owner_), slot0_, off_, \
                          obj_, mark_, other_cpu, full, aborted)
#define pcm_arch_rseq_push_here(slot0_, off_, cpus_, obj_, mark_, no_cpu, full, aborted)        \
    pcm_arch_rseq_push_if("cmpl %k[who], %%eax", "jae", PCM_RSEQ_TOP_DEPTH_OR_0, *(cpus_), slot0_, off_, obj_, \
                          mark_, no_cpu, full, aborted)

/*
 * C:  cpu = area->cpu_id;
 *     if (cpu != owner) return EMPTY;
 *     if (the slot's bin's limit == 0) return EMPTY;   (stopped: a drain)
 *     top = slot0[cpu * stride];
 *     if (top == &slot0[cpu * stride]) return EMPTY;
 *     slot0[cpu * stride] = &slot0[cpu * stride];       <- commit
 *     return top;                  (abort: return PCM_RSEQ_ABORTED)
 * The chain returned ends at the slot's address (pcm_chain_more).
 */
static inline void *pcm_arch_rseq_take_all(pcm_word_t *slot0, ptrdiff_t off, unsigned owner)
{
    void *chain;
    __asm__ __volatile__(
        PCM_RSEQ_DESCRIPTOR
        "1:\n\t"
        "movl %%fs:4(%[off]), %%eax\n\t"
        "cmpl %k[owner], %%eax\n\t"
        "jne 5f\n\t"
        "shlq %[shift], %%rax\n\t"
        "addq %[slot0], %%rax\n\t"
        "cmpl $0, %c[limit](%%rax)\n\t" /* stopped (a drain): empty */
        "je 5f\n\t"
        "movq (%%rax), %[chain]\n\t"
        "cmpq %%rax, %[chain]\n\t" /* the slot's own address: empty */
        "je 5f\n\t"
        "movq %%rax, (%%rax)\n\t" /* commit: empty */
        "2:\n\t"
        ".pushsection __rseq_failure, \"ax\"\n\t"
        PCM_RSEQ_SIGNATURE
        "4: movl $1, %k[chain]\n\t"
        "jmp 6f\n\t"
        "5: xorl %k[chain], %k[chain]\n\t"
        "jmp 6f\n\t"
        ".popsection\n\t"
        "6:\n\t"
        : [chain] "=&r"(chain)
        : [slot0] "r"(slot0), [off] "r"(off), [owner] "r"(owner), [limit] "i"(PCM_RSEQ_LIMIT_OFFSET),
          [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)
        : "rax", "memory", "cc");
    return chain;
}

/*
 * C:  cpu = area->cpu_id;
 *     if (cpu != owner) goto refused;
 *     if (slot0[cpu * stride] != &slot0[cpu * stride]) goto refused;
 *     slot0[cpu * stride] = chain;                      <- commit
 *     (abort: goto aborted)
 * A whole chain into an empty cache at once: the caller wrote the chain's
 * links and depths (counted from an empty cache) beforehand, its bottom's
 * link the slot's address (pcm_heap_list_end).
 */
#define pcm_arch_rseq_put_if_empty(slot0_, off_, owner_, chain_, refused, aborted)              \
    __asm__ goto(PCM_RSEQ_DESCRIPTOR                                                            \
                 "1:\n\t"                                                                       \
                 "movl %%fs:4(%[off]), %%eax\n\t"                                               \
                 "cmpl %k[owner], %%eax\n\t"                                                    \
                 "jne %l[" #refused "]\n\t"                                                     \
                 "shlq %[shift], %%rax\n\t"                                                     \
                 "addq %[slot], %%rax\n\t"                                                      \
                 "cmpq %%rax, (%%rax)\n\t" /* empty: its own address */                        \
                 "jne %l[" #refused "]\n\t"                                                     \
                 "movq %[chain], (%%rax)\n\t" /* commit */                                      \
                 "2:\n\t"                                                                       \
                 ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE                   \
                 "4: jmp %l[" #aborted "]\n\t"                                                  \
                 ".popsection\n\t"                                                              \
                 :                                                                              \
                 : [slot] "r"(slot0_), [off] "r"(off_), [owner] "r"((unsigned)(owner_)),        \
                   [chain] "r"(chain_), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)                      \
                 : "rax", "memory", "cc"                                                        \
                 : refused, aborted)
