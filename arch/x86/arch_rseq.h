/*
 * arch/x86/arch_rseq.h - the per-CPU cache operations as restartable
 * sequences, in i586 assembly (the contract is in src/percpu_rseq.h; the
 * section shape and why a restart is safe at every instruction are spelled
 * out in arch/x86_64/arch_rseq.h and hold here word for word).
 *
 * Differences from x86_64:
 *   - the rseq area is reached through %gs, and rseq_cs is a 64-bit field
 *     of which only the low half is written: the high half is 0 from
 *     glibc's set-up and the kernel only ever clears the whole field;
 *   - i386 has no PC-relative addressing, so the descriptor's address is
 *     computed from an anchor in the same section of the same object file
 *     (the difference is an assembly-time constant) whose address the
 *     compiler materialises position-independently (GOT-relative);
 *   - words are 4 bytes, the depth field 12 bits (free_mark.h);
 *   - only i586 instructions (no cmov): tests/audit/x86_instructions.sh.
 * The signature glibc registered is 0x53053053 on i386 too.  Lists end at
 * their slot as on x86_64 (the pair's tag half, at 4, reads 0 as the
 * empty list's depth): two instructions fewer a free here.
 */
#ifndef PCM_PERCPU_RSEQ_INSIDE
#error "include src/percpu_rseq.h, not an arch module's header"
#endif
#if !defined(__i386__)
#error "arch/x86 built for another architecture"
#endif

#define PCM_ARCH_RSEQ 1
#define PCM_ARCH_RSEQ_LISTS_END_AT_SLOT 1

_Static_assert(RSEQ_SIG == 0x53053053, "the signature below is glibc's RSEQ_SIG");

/* This object file's anchor in __rseq_cs (no bytes of its own, so the
 * section still holds nothing but descriptors). */
static char pcm_rseq_anchor[0] __attribute__((section("__rseq_cs"), aligned(32), used));

#define PCM_RSEQ_DESCRIPTOR                                                    \
    ".pushsection __rseq_cs, \"aw\"\n\t"                                       \
    ".balign 32\n\t"                                                           \
    "3: .long 0, 0\n\t"                                                        \
    ".long 1f, 0, 2f - 1f, 0, 4f, 0\n\t"                                       \
    ".popsection\n\t"                                                          \
    "leal 3b - pcm_rseq_anchor(%[anchor]), %%eax\n\t"                          \
    "movl %%eax, %%gs:8(%[off])\n\t" /* area->rseq_cs (low half) */

#define PCM_RSEQ_SIGNATURE ".byte 0x0f, 0xb9, 0x3d\n\t.long 0x53053053\n\t"

/* C: as in arch/x86_64/arch_rseq.h (pop), answering the object, 0 (go to
 * `empty`) or 1 (go to `aborted`): gcc loops allocating i386 registers
 * for an asm goto with an output here, so the branching is in C.  cpu_id
 * -1 or -2 wraps, shifted and added, to heap -1 or -2: the guards below
 * heap 0. */
static inline __attribute__((always_inline)) void *
pcm_arch_rseq_pop_value(pcm_word_t *slot0, ptrdiff_t off)
{
    void *obj;
    pcm_word_t next;
    __asm__ __volatile__(
        PCM_RSEQ_DESCRIPTOR
        "1:\n\t"
        "movl %%gs:4(%[off]), %%eax\n\t" /* cpu_id */
        "shll %[shift], %%eax\n\t"
        "addl %[slot0], %%eax\n\t"
        "cmpl $0, %c[limit](%%eax)\n\t" /* stopped, or a guard: empty */
        "je 5f\n\t"
        "movl (%%eax), %[obj]\n\t"
        "cmpl %%eax, %[obj]\n\t" /* the slot's own address: empty */
        "je 5f\n\t"
        "movl (%[obj]), %[next]\n\t"
        "movl %[next], (%%eax)\n\t" /* commit */
        "2:\n\t"
        ".pushsection __rseq_failure, \"ax\"\n\t"
        PCM_RSEQ_SIGNATURE
        "4: movl $1, %[obj]\n\t"
        "jmp 6f\n\t"
        "5: xorl %[obj], %[obj]\n\t"
        "jmp 6f\n\t"
        ".popsection\n\t"
        "6:\n\t"
        : [obj] "=&r"(obj), [next] "=&r"(next)
        : [slot0] "rm"(slot0), [off] "r"(off), [anchor] "r"(pcm_rseq_anchor),
          [limit] "i"(PCM_RSEQ_LIMIT_OFFSET), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)
        : "eax", "memory", "cc");
    return obj;
}

#define pcm_arch_rseq_pop(obj_, slot0_, off_, empty, aborted)                                   \
    do {                                                                                        \
        void *pcm_popped_ = pcm_arch_rseq_pop_value((slot0_), (off_));                          \
        if (__builtin_expect((uintptr_t)pcm_popped_ <= 1, 0)) {                                 \
            if (pcm_popped_)                                                                    \
                goto aborted;                                                                   \
            goto empty;                                                                         \
        }                                                                                       \
        (obj_) = pcm_popped_;                                                                   \
    } while (0)

/* C: as in arch/x86_64/arch_rseq.h (push), with two changes for i386's
 * few registers: obj->next is written before the depth check (obj is the
 * caller's until the commit, so that is harmless), and the three values
 * the section only reads travel in one block on the stack, one register
 * for all (gcc otherwise runs out of registers, or loops, allocating
 * them).  Scratch: eax (cpu, then the slot), ecx (top, then its depth,
 * then word 1).  depth_: as on x86_64, the owner's push reads the top's
 * word 1 untested, push_here tests for a 0 first. */
struct pcm_arch_rseq_push_args {
    pcm_word_t *slot0; /* 0 */
    unsigned who;      /* 4: the owner, or the number of CPUs */
    pcm_word_t mark;   /* 8 */
};

#define pcm_arch_rseq_push_if(jump_, depth_, slot0_, off_, who_, obj_, mark_, miss, full, aborted) \
    do {                                                                                        \
        const struct pcm_arch_rseq_push_args pcm_args_ = {(slot0_), (unsigned)(who_), (mark_)}; \
        __asm__ goto(PCM_RSEQ_DESCRIPTOR                                                        \
                     "1:\n\t"                                                                   \
                     "movl %%gs:4(%[off]), %%eax\n\t"                                           \
                     "cmpl 4(%[args]), %%eax\n\t"                                               \
                     jump_ " %l[" #miss "]\n\t"                                                 \
                     "shll %[shift], %%eax\n\t"                                                 \
                     "addl 0(%[args]), %%eax\n\t"                                               \
                     "movl (%%eax), %%ecx\n\t"                                                  \
                     "movl %%ecx, (%[object])\n\t" /* obj->next = top: obj is still ours */     \
                     depth_ /* the top's depth into ecx */                                      \
                     "cmpl %c[limit](%%eax), %%ecx\n\t" /* not yet ready: 0 */                  \
                     "jae %l[" #full "]\n\t"                                                    \
                     "incl %%ecx\n\t"                                                           \
                     "addl 8(%[args]), %%ecx\n\t"                                               \
                     "movl %%ecx, 4(%[object])\n\t"                                             \
                     "movl %[object], (%%eax)\n\t" /* commit */                                 \
                     "2:\n\t"                                                                   \
                     ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE               \
                     "4: jmp %l[" #aborted "]\n\t"                                              \
                     ".popsection\n\t"                                                          \
                     :                                                                          \
                     : [args] "r"(&pcm_args_), "m"(pcm_args_), [off] "r"(off_), [object] "r"(obj_), \
                       [anchor] "r"(pcm_rseq_anchor), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT),       \
                       [limit] "i"(PCM_RSEQ_LIMIT_OFFSET)                                       \
                     : "eax", "ecx", "memory", "cc"                                             \
                     : miss, full, aborted);                                                    \
    } while (0)
/* The two checks of the CPU (see arch/x86_64/arch_rseq.h), and the two
 * reads of the depth (PCM_DEPTH_BITS == 12). */
#define PCM_RSEQ_TOP_DEPTH "movl 4(%%ecx), %%ecx\n\tandl $0xfff, %%ecx\n\t"
#define PCM_RSEQ_TOP_DEPTH_OR_0 "testl %%ecx, %%ecx\n\tjz 7f\n\t" PCM_RSEQ_TOP_DEPTH "7:\n\t"
#define pcm_arch_rseq_push(slot0_, off_, owner_, obj_, mark_, other_cpu, full, aborted)       \
    pcm_arch_rseq_push_if("jne", PCM_RSEQ_TOP_DEPTH, slot0_, off_, owner_, obj_, mark_, other_cpu, full, aborted)
#define pcm_arch_rseq_push_here(slot0_, off_, cpus_, obj_, mark_, no_cpu, full, aborted)      \
    pcm_arch_rseq_push_if("jae", PCM_RSEQ_TOP_DEPTH_OR_0, slot0_, off_, *(cpus_), obj_, mark_, no_cpu, full, \
                          aborted)

/* C: as in arch/x86_64/arch_rseq.h (take all). */
static inline void *pcm_arch_rseq_take_all(pcm_word_t *slot0, ptrdiff_t off, unsigned owner)
{
    void *chain;
    __asm__ __volatile__(
        PCM_RSEQ_DESCRIPTOR
        "1:\n\t"
        "movl %%gs:4(%[off]), %%eax\n\t"
        "cmpl %[owner], %%eax\n\t"
        "jne 5f\n\t"
        "shll %[shift], %%eax\n\t"
        "addl %[slot0], %%eax\n\t"
        "cmpl $0, %c[limit](%%eax)\n\t" /* stopped (a drain): empty */
        "je 5f\n\t"
        "movl (%%eax), %[chain]\n\t"
        "cmpl %%eax, %[chain]\n\t" /* the slot's own address: empty */
        "je 5f\n\t"
        "movl %%eax, (%%eax)\n\t" /* commit: empty */
        "2:\n\t"
        ".pushsection __rseq_failure, \"ax\"\n\t"
        PCM_RSEQ_SIGNATURE
        "4: movl $1, %[chain]\n\t"
        "jmp 6f\n\t"
        "5: xorl %[chain], %[chain]\n\t"
        "jmp 6f\n\t"
        ".popsection\n\t"
        "6:\n\t"
        : [chain] "=&r"(chain)
        : [slot0] "rm"(slot0), [off] "r"(off), [owner] "rm"(owner), [anchor] "r"(pcm_rseq_anchor),
          [limit] "i"(PCM_RSEQ_LIMIT_OFFSET), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)
        : "eax", "memory", "cc");
    return chain;
}

/* C: as in arch/x86_64/arch_rseq.h (put if empty).  Scratch: eax (cpu,
 * then the slot). */
#define pcm_arch_rseq_put_if_empty(slot0_, off_, owner_, chain_, refused, aborted)              \
    __asm__ goto(PCM_RSEQ_DESCRIPTOR                                                            \
                 "1:\n\t"                                                                       \
                 "movl %%gs:4(%[off]), %%eax\n\t"                                               \
                 "cmpl %[owner], %%eax\n\t"                                                     \
                 "jne %l[" #refused "]\n\t"                                                     \
                 "shll %[shift], %%eax\n\t"                                                     \
                 "addl %[slot], %%eax\n\t"                                                      \
                 "cmpl %%eax, (%%eax)\n\t" /* empty: its own address */                         \
                 "jne %l[" #refused "]\n\t"                                                     \
                 "movl %[chain], (%%eax)\n\t" /* commit */                                      \
                 "2:\n\t"                                                                       \
                 ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE                   \
                 "4: jmp %l[" #aborted "]\n\t"                                                  \
                 ".popsection\n\t"                                                              \
                 :                                                                              \
                 : [slot] "r"(slot0_), [off] "r"(off_), [owner] "r"((unsigned)(owner_)), [chain] "r"(chain_), \
                   [anchor] "r"(pcm_rseq_anchor), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)            \
                 : "eax", "memory", "cc"                                                        \
                 : refused, aborted)
