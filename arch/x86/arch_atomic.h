/*
 * arch/x86/arch_atomic.h - the primitives for 32-bit x86, i586 and later
 * (the AMD K6 is the oldest CPU this module targets).
 *
 * Hand-written inline asm on 32-bit words.  It uses nothing a K6 lacks: no
 * cmov, no SSE (so no mfence/lfence/sfence), no multi-byte nop; the audit
 * tests/audit/x86_instructions.sh checks the built objects for that.  The
 * one instruction beyond the i486 is cmpxchg8b (CPUID CX8), which
 * pcm_arch_init (arch/x86/arch_init.c) checks for at start-up.
 *
 * Why plain moves and compiler barriers suffice for most of the orderings:
 * x86 is TSO ("total store order", Intel SDM vol. 3 8.2.2, which the K6
 * also obeys for write-back memory): loads are not reordered with other
 * loads, stores are not reordered with other stores, and stores are not
 * reordered with earlier loads.  The only reordering the hardware does is
 * a later load passing an earlier store (through the store buffer).  So
 *   - every plain load is already an acquire load,
 *   - every plain store is already a release store,
 *   - only store->load order needs an instruction: a locked one, which
 *     drains the store buffer (the locked read-modify-write instructions
 *     below are therefore full barriers too).
 * What remains is the compiler, which may move ordinary memory accesses
 * across an asm statement unless it says it touches memory: every block
 * below carries the "memory" clobber so that the compiler keeps the program
 * order of memory accesses around it (and reloads values it had cached in
 * registers).
 *
 * i386 position-independent code keeps the GOT pointer in %ebx, so no asm
 * below names %ebx as an operand, and no memory operand whose address the
 * compiler chooses (it could be %ebx-relative) is used while %ebx holds
 * something else.
 */
#ifndef PCM_ATOMIC_INSIDE
#error "include src/atomic.h, not an arch module's header"
#endif

#ifndef __i386__
#error "arch/x86 is the 32-bit x86 module; use arch/x86_64 for 64-bit builds"
#endif

#define PCM_ARCH_NAME "x86"
#define PCM_ARCH_VARIANT_NAME "i586"

/*
 * A K6 has 32-byte cache lines, but every x86 since the Pentium 4 / K7
 * has 64-byte lines (and adjacent-line prefetch pairs them further): padding
 * to 64 costs a K6 a little memory and keeps later CPUs running this same
 * i586 build free of false sharing.
 */
#define PCM_ARCH_CACHE_LINE 64

_Static_assert(sizeof(pcm_word_t) == 4, "arch/x86 works on 32-bit words");
_Static_assert(sizeof(pcm_pair_t) == 8, "cmpxchg8b works on an 8-byte pair");

/* ---- loads and stores: plain mov (aligned 32-bit mov is single-copy
 * atomic on every x86 since the i486) ---- */

/* return *p;  atomic (aligned mov), no ordering asked for.  The "memory"
 * clobber is more than relaxed needs; it keeps the compiler from merging
 * or hoisting the load out of a polling loop. */
static inline pcm_word_t pcm_arch_load_relaxed(const volatile pcm_word_t *p)
{
    pcm_word_t v;
    __asm__ __volatile__("movl %1, %0" : "=r"(v) : "m"(*p) : "memory");
    return v;
}
#define pcm_arch_load_relaxed pcm_arch_load_relaxed

/* return *p;  acquire: TSO never lets a later load or store of this CPU be
 * performed before this load, so the plain mov is an acquire load; the
 * "memory" clobber stops the compiler from hoisting later accesses above
 * it. */
static inline pcm_word_t pcm_arch_load_acquire(const volatile pcm_word_t *p)
{
    pcm_word_t v;
    __asm__ __volatile__("movl %1, %0" : "=r"(v) : "m"(*p) : "memory");
    return v;
}
#define pcm_arch_load_acquire pcm_arch_load_acquire

/* *p = v;  atomic (aligned mov), no ordering asked for. */
static inline void pcm_arch_store_relaxed(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("movl %1, %0" : "=m"(*p) : "ri"(v) : "memory");
}
#define pcm_arch_store_relaxed pcm_arch_store_relaxed

/* *p = v;  release: TSO performs this store after every earlier load and
 * store of this CPU, so the plain mov is a release store; the "memory"
 * clobber stops the compiler from sinking earlier accesses below it. */
static inline void pcm_arch_store_release(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("movl %1, %0" : "=m"(*p) : "ri"(v) : "memory");
}
#define pcm_arch_store_release pcm_arch_store_release

/* ---- read-modify-write: locked instructions, each a full barrier ---- */

/*
 * if (*p == *expected) { *p = desired; return true; }
 * else { *expected = *p; return false; }      -- all as one atomic step.
 * lock cmpxchg compares %eax with *p: equal -> ZF=1 and *p = desired;
 * different -> ZF=0 and %eax = *p.  A locked instruction is a full barrier
 * (no earlier or later load or store passes it), so acq_rel holds on both
 * outcomes; cmpxchg never fails spuriously.
 */
static inline bool pcm_arch_cas(volatile pcm_word_t *p, pcm_word_t *expected, pcm_word_t desired)
{
    bool ok;
    pcm_word_t seen = *expected;
    __asm__ __volatile__("lock; cmpxchgl %3, %1"
                         : "=@ccz"(ok), "+m"(*p), "+a"(seen)
                         : "r"(desired)
                         : "memory");
    if (!ok)
        *expected = seen;
    return ok;
}
#define pcm_arch_cas pcm_arch_cas

/*
 * The same on the 8-byte pair, with lock cmpxchg8b: compares %edx:%eax
 * with the 8 bytes at the address; equal -> ZF=1 and they become
 * %ecx:%ebx; different -> ZF=0 and %edx:%eax = the 8 bytes, read in the
 * same locked access (the only atomic 64-bit read an i586 has: two movl
 * may tear, and the K6 has no SSE or 64-bit atomic load).
 *
 * %ebx must hold the new low word, but PIC code may keep its GOT pointer
 * there and it must not be an operand: the new low word comes in %esi and
 * is swapped into %ebx around the cmpxchg8b (xchg reg,reg has no lock and
 * leaves the flags alone, so ZF survives the swap back, and %ebx and %esi
 * leave as they came).  The address is in %edi, never a compiler-chosen
 * memory operand, which could have been %ebx-relative.  The pair is written
 * through the "memory" clobber.  Ordering: as for cas, a locked
 * instruction is a full barrier.
 *
 * The `addl $0` changes no register, only the arithmetic flags, which
 * cmpxchg8b overwrites anyway; a real CPU loses one cycle.  It is there for
 * QEMU up to 7.2 (Debian 12's, where the K6-class tests run): its
 * cmpxchg8b derives the flags besides ZF from a stale lazy-flags state,
 * and if the last flag-setting instruction left a large value there (lock
 * xadd leaves the old memory word) stray bits such as TF and IOPL reach
 * EFLAGS at the next exit to the emulator's loop (a pause, a system call):
 * the guest then dies of SIGTRAP or QEMU of an IOPL assertion.  Adding 0
 * makes that state 0, so the stale flags come out clean.  (QEMU 8.0
 * rewrote cmpxchg8b: "target/i386: Inline cmpxchg8b".)
 */
static inline bool pcm_arch_cas2(volatile pcm_pair_t *p, pcm_pair_t *expected, pcm_pair_t desired)
{
    bool ok;
    pcm_word_t seen_lo = expected->half.ptr;
    pcm_word_t seen_hi = expected->half.tag;
    __asm__ __volatile__("addl $0, %[lo]\n\t"
                         "xchgl %%ebx, %[lo]\n\t"
                         "lock; cmpxchg8b (%[pair])\n\t"
                         "xchgl %%ebx, %[lo]"
                         : "=@ccz"(ok), "+a"(seen_lo), "+d"(seen_hi)
                         : [pair] "D"(p), [lo] "S"(desired.half.ptr), "c"(desired.half.tag)
                         : "memory");
    if (!ok) {
        expected->half.ptr = seen_lo;
        expected->half.tag = seen_hi;
    }
    return ok;
}
#define pcm_arch_cas2 pcm_arch_cas2

/* old = *p; *p = v; return old;  xchg with a memory operand is always
 * locked (no prefix needed), so it is atomic and a full barrier. */
static inline pcm_word_t pcm_arch_swap(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("xchgl %0, %1" : "+r"(v), "+m"(*p) : : "memory");
    return v;
}
#define pcm_arch_swap pcm_arch_swap

/* old = *p; *p = old + v (wrapping); return old;  lock xadd: atomic, a full
 * barrier. */
static inline pcm_word_t pcm_arch_fetch_add(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("lock; xaddl %0, %1" : "+r"(v), "+m"(*p) : : "memory", "cc");
    return v;
}
#define pcm_arch_fetch_add pcm_arch_fetch_add

/* ---- fences ---- */

/* Full fence, store->load included.  The K6 has no mfence (SSE2); a locked
 * read-modify-write drains the store buffer and orders everything around
 * it.  Adding 0 to the word at the top of the stack changes nothing, and
 * that line is almost surely already in this CPU's cache. */
static inline void pcm_arch_fence_full(void)
{
    __asm__ __volatile__("lock; addl $0, (%%esp)" : : : "memory", "cc");
}
#define pcm_arch_fence_full pcm_arch_fence_full

/* Acquire fence: earlier loads before later loads and stores.  TSO already
 * keeps loads in order with later loads and stores, so only the compiler
 * needs stopping. */
static inline void pcm_arch_fence_acquire(void)
{
    __asm__ __volatile__("" : : : "memory");
}
#define pcm_arch_fence_acquire pcm_arch_fence_acquire

/* Release fence: earlier loads and stores before later stores.  TSO never
 * lets a store pass an earlier load or store, so only the compiler needs
 * stopping. */
static inline void pcm_arch_fence_release(void)
{
    __asm__ __volatile__("" : : : "memory");
}
#define pcm_arch_fence_release pcm_arch_fence_release

/* Spin-wait hint: `rep; nop` is the encoding of `pause` (Pentium 4 and
 * later: eases the pipeline and the sibling hyperthread); older CPUs, the
 * K6 among them, ignore the prefix and run a plain nop.  No ordering; the
 * "memory" clobber only keeps a spin loop re-reading memory. */
static inline void pcm_arch_cpu_relax(void)
{
    __asm__ __volatile__("rep; nop" : : : "memory");
}
#define pcm_arch_cpu_relax pcm_arch_cpu_relax

/* Start-up check that the CPU has cmpxchg8b (arch/x86/arch_init.c). */
const char *pcm_arch_init(void);
#define pcm_arch_init pcm_arch_init
