/*
 * arch/arm64/arch_rseq.h - the per-CPU cache operations as restartable
 * sequences, in AArch64 assembly (the contract is in src/percpu_rseq.h;
 * the section shape and why a restart is safe at every instruction are
 * spelled out in arch/x86_64/arch_rseq.h and hold here word for word).
 *
 * Here: the descriptor's address comes from adrp + add (PC-relative, so
 * position-independent and in range anywhere in a 4 GiB image), the rseq
 * area is the thread pointer (tpidr_el0) plus glibc's offset, computed by
 * the caller.  The signature before each abort handler is RSEQ_SIG,
 * 0xd428bc00, emitted with .inst: it is the instruction brk #0x45e0, so a
 * stray jump into it traps instead of running on.  No barrier is needed:
 * a CPU's slot is only ever touched by threads running on that CPU, which
 * see their own CPU's stores in order, and a migration passes through the
 * kernel's context switch, which orders everything before it.  No
 * exclusive pair, no LSE atomic anywhere in here.
 */
#ifndef PCM_PERCPU_RSEQ_INSIDE
#error "include src/percpu_rseq.h, not an arch module's header"
#endif
#ifndef __aarch64__
#error "arch/arm64 built for another architecture"
#endif

#define PCM_ARCH_RSEQ 1

_Static_assert(RSEQ_SIG == 0xd428bc00, "the signature below is glibc's RSEQ_SIG");

/* area->rseq_cs = &descriptor; `tmp` is any scratch register. */
#define PCM_RSEQ_DESCRIPTOR(tmp)                                               \
    ".pushsection __rseq_cs, \"aw\"\n\t"                                       \
    ".balign 32\n\t"                                                           \
    "3: .long 0, 0\n\t"                                                        \
    ".quad 1f, 2f - 1f, 4f\n\t"                                                \
    ".popsection\n\t"                                                          \
    "adrp " tmp ", 3b\n\t"                                                     \
    "add " tmp ", " tmp ", :lo12:3b\n\t"                                       \
    "str " tmp ", [%[area], #8]\n\t"

#define PCM_RSEQ_SIGNATURE ".inst 0xd428bc00\n\t"

static inline volatile struct rseq *pcm_arch_rseq_area(ptrdiff_t off)
{
    return (volatile struct rseq *)((char *)__builtin_thread_pointer() + off);
}

/* C: as in arch/x86_64/arch_rseq.h (pop): cpu_id sign-extended, so that
 * -1 and -2 find the guard heaps below heap 0; obj 0 on every jump to
 * empty.  Scratch: x9 (cpu, then the slot), x10 (the limit, then the next
 * object). */
#define pcm_arch_rseq_pop(obj_, slot0_, off_, empty, aborted)                                   \
    __asm__ goto(PCM_RSEQ_DESCRIPTOR("x9")                                                      \
                 "1:\n\t"                                                                       \
                 "ldrsw x9, [%[area], #4]\n\t" /* cpu_id, sign-extended */                      \
                 "add x9, %[slot], x9, lsl %[shift]\n\t"                                        \
                 "ldr w10, [x9, %[limit]]\n\t" /* stopped, or a guard: empty */                 \
                 "cbz w10, 5f\n\t"                                                              \
                 "ldr %[obj], [x9]\n\t"                                                         \
                 "cbz %[obj], %l[" #empty "]\n\t"                                               \
                 "ldr x10, [%[obj]]\n\t"                                                        \
                 "str x10, [x9]\n\t" /* commit */                                               \
                 "2:\n\t"                                                                       \
                 ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE                   \
                 "4: b %l[" #aborted "]\n\t"                                                    \
                 "5: mov %[obj], xzr\n\t"                                                       \
                 "b %l[" #empty "]\n\t"                                                         \
                 ".popsection\n\t"                                                              \
                 : [obj] "=&r"(obj_)                                                            \
                 : [slot] "r"(slot0_), [area] "r"(pcm_arch_rseq_area(off_)),                    \
                   [limit] "i"(PCM_RSEQ_LIMIT_OFFSET), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)       \
                 : "x9", "x10", "memory", "cc"                                                  \
                 : empty, aborted)

/* C: as in arch/x86_64/arch_rseq.h (push).  Scratch: x9 (cpu, then the
 * slot), x10 (top), x11 (depth, then word 1), x12 (the limit). */
#define pcm_arch_rseq_push_if(jump_, slot0_, off_, who_, obj_, mark_, miss, full, aborted)      \
    __asm__ goto(PCM_RSEQ_DESCRIPTOR("x9")                                                      \
                 "1:\n\t"                                                                       \
                 "ldr w9, [%[area], #4]\n\t"                                                    \
                 "cmp w9, %w[who]\n\t"                                                          \
                 jump_ " %l[" #miss "]\n\t"                                                     \
                 "add x9, %[slot], x9, lsl %[shift]\n\t"                                        \
                 "ldr x10, [x9]\n\t"                                                            \
                 "mov x11, #0\n\t"                                                              \
                 "ldr w12, [x9, %[limit]]\n\t"                                                  \
                 "cbz x10, 7f\n\t"                                                              \
                 "ldrh w11, [x10, #8]\n\t" /* depth: PCM_DEPTH_BITS == 16 */                    \
                 "7: cmp w11, w12\n\t"                                                          \
                 "b.hs %l[" #full "]\n\t"                                                       \
                 "str x10, [%[object]]\n\t"                                                     \
                 "add x11, x11, %[mark]\n\t"                                                    \
                 "add x11, x11, #1\n\t"                                                         \
                 "str x11, [%[object], #8]\n\t"                                                 \
                 "str %[object], [x9]\n\t" /* commit */                                         \
                 "2:\n\t"                                                                       \
                 ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE                   \
                 "4: b %l[" #aborted "]\n\t"                                                    \
                 ".popsection\n\t"                                                              \
                 :                                                                              \
                 : [slot] "r"(slot0_), [area] "r"(pcm_arch_rseq_area(off_)),                    \
                   [who] "r"((unsigned)(who_)), [object] "r"(obj_), [mark] "r"(mark_),          \
                   [limit] "i"(PCM_RSEQ_LIMIT_OFFSET), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)       \
                 : "x9", "x10", "x11", "x12", "memory", "cc"                                    \
                 : miss, full, aborted)
/* The two checks of the CPU (see arch/x86_64/arch_rseq.h). */
#define pcm_arch_rseq_push(slot0_, off_, owner_, obj_, mark_, other_cpu, full, aborted)       \
    pcm_arch_rseq_push_if("b.ne", slot0_, off_, owner_, obj_, mark_, other_cpu, full, aborted)
#define pcm_arch_rseq_push_here(slot0_, off_, cpus_, obj_, mark_, no_cpu, full, aborted)      \
    pcm_arch_rseq_push_if("b.hs", slot0_, off_, *(cpus_), obj_, mark_, no_cpu, full, aborted)

/* C: as in arch/x86_64/arch_rseq.h (take all). */
static inline void *pcm_arch_rseq_take_all(pcm_word_t *slot0, ptrdiff_t off, unsigned owner)
{
    void *chain;
    pcm_word_t slot;
    __asm__ __volatile__(
        PCM_RSEQ_DESCRIPTOR("%[slot]")
        "1:\n\t"
        "ldr %w[slot], [%[area], #4]\n\t"
        "cmp %w[slot], %w[owner]\n\t"
        "b.ne 5f\n\t"
        "add %[slot], %[slot0], %[slot], lsl %[shift]\n\t"
        "ldr %w[chain], [%[slot], %[limit]]\n\t" /* stopped (a drain): empty */
        "cbz %w[chain], 5f\n\t"
        "ldr %[chain], [%[slot]]\n\t"
        "str xzr, [%[slot]]\n\t" /* commit */
        "2:\n\t"
        ".pushsection __rseq_failure, \"ax\"\n\t"
        PCM_RSEQ_SIGNATURE
        "4: mov %[chain], #1\n\t"
        "b 6f\n\t"
        "5: mov %[chain], #0\n\t"
        "b 6f\n\t"
        ".popsection\n\t"
        "6:\n\t"
        : [chain] "=&r"(chain), [slot] "=&r"(slot)
        : [slot0] "r"(slot0), [area] "r"(pcm_arch_rseq_area(off)), [owner] "r"(owner),
          [limit] "i"(PCM_RSEQ_LIMIT_OFFSET), [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)
        : "memory", "cc");
    return chain;
}

/* C: as in arch/x86_64/arch_rseq.h (put if empty).  Scratch: x9 (cpu,
 * then the slot), x10 (the slot's top). */
#define pcm_arch_rseq_put_if_empty(slot0_, off_, owner_, chain_, refused, aborted)              \
    __asm__ goto(PCM_RSEQ_DESCRIPTOR("x9")                                                      \
                 "1:\n\t"                                                                       \
                 "ldr w9, [%[area], #4]\n\t"                                                    \
                 "cmp w9, %w[owner]\n\t"                                                        \
                 "b.ne %l[" #refused "]\n\t"                                                    \
                 "add x9, %[slot], x9, lsl %[shift]\n\t"                                        \
                 "ldr x10, [x9]\n\t"                                                            \
                 "cbnz x10, %l[" #refused "]\n\t"                                               \
                 "str %[chain], [x9]\n\t" /* commit */                                          \
                 "2:\n\t"                                                                       \
                 ".pushsection __rseq_failure, \"ax\"\n\t" PCM_RSEQ_SIGNATURE                   \
                 "4: b %l[" #aborted "]\n\t"                                                    \
                 ".popsection\n\t"                                                              \
                 :                                                                              \
                 : [slot] "r"(slot0_), [area] "r"(pcm_arch_rseq_area(off_)),                    \
                   [owner] "r"((unsigned)(owner_)), [chain] "r"(chain_),                        \
                   [shift] "i"(PCM_RSEQ_STRIDE_SHIFT)                                           \
                 : "x9", "x10", "memory", "cc"                                                  \
                 : refused, aborted)
