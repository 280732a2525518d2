/*
 * arch/x86/arch_init.c - start-up check for the i586 module: the CPU must
 * have cmpxchg8b, which pcm_arch_cas2 is built on.
 *
 * Calls nothing from the C library (it also links into the freestanding K6
 * test program), keeps no state (so it is idempotent and safe from any
 * thread: each call asks the CPU again; it runs once at start-up), and
 * names no %ebx operand, which i386 PIC code may reserve for its GOT
 * pointer.
 *
 * Known false refusals, accepted: a few i586-class CPUs have cmpxchg8b but
 * hide it by default (Cyrix 6x86 ships with CPUID disabled; IDT WinChip
 * clears the CX8 bit for an old Windows NT bug).  We go by what CPUID says.
 */
#include "atomic.h"

/* Can this CPU run CPUID?  It can iff software can flip EFLAGS.ID (bit 21);
 * a 386 or an early 486 cannot, and those lack cmpxchg8b anyway.
 * In C: old = eflags; eflags = old ^ ID; changed = (eflags ^ old) & ID;
 * eflags = old.  pushfl/popfl only, so no register but the two outputs
 * changes, and EFLAGS is put back as it was. */
static bool x86_has_cpuid(void)
{
    pcm_word_t flipped, original;
    __asm__ __volatile__("pushfl\n\t"
                         "popl %0\n\t"          /* flipped = eflags */
                         "movl %0, %1\n\t"      /* original = eflags */
                         "xorl $0x200000, %0\n\t"
                         "pushl %0\n\t"
                         "popfl\n\t"            /* eflags = original ^ ID */
                         "pushfl\n\t"
                         "popl %0\n\t"          /* flipped = what stuck */
                         "pushl %1\n\t"
                         "popfl"                /* eflags = original */
                         : "=&r"(flipped), "=&r"(original)
                         :
                         : "cc");
    return ((flipped ^ original) & 0x200000u) != 0;
}

/* CPUID leaf `leaf` (sub-leaf 0): returns EAX, stores EDX.  CPUID also
 * writes EBX, which we may not name in PIC code: it is kept in %esi across
 * the instruction and put back. */
static pcm_word_t x86_cpuid(pcm_word_t leaf, pcm_word_t *edx)
{
    pcm_word_t a, c, d;
    __asm__ __volatile__("movl %%ebx, %%esi\n\t"
                         "cpuid\n\t"
                         "movl %%esi, %%ebx"
                         : "=a"(a), "=c"(c), "=d"(d)
                         : "0"(leaf), "1"((pcm_word_t)0)
                         : "esi");
    (void)c;
    *edx = d;
    return a;
}

#define X86_CPUID_EDX_CX8 (1u << 8) /* leaf 1, EDX bit 8: cmpxchg8b */

const char *pcm_arch_init(void)
{
    static const char no_cx8[] = "pcmalloc: this CPU lacks cmpxchg8b (i586 or later required)";
    if (!x86_has_cpuid())
        return no_cx8;
    pcm_word_t edx;
    if (x86_cpuid(0, &edx) < 1) /* leaf 0 gives the highest leaf there is */
        return no_cx8;
    x86_cpuid(1, &edx);
    if (!(edx & X86_CPUID_EDX_CX8))
        return no_cx8;
    return NULL;
}
