/*
 * atomic.h - the one concurrency interface of pcmalloc.
 *
 * Everything in src/ that touches shared memory goes through the names
 * below; nothing in src/ uses <stdatomic.h> or __atomic builtins, so each
 * build really runs its own hand-written arch module.  The Makefile puts
 * exactly one arch/<ARCH>/ directory on the include path; that module's
 * arch_atomic.h supplies the primitives marked [arch] with the presence
 * idiom (`#define pcm_arch_cas pcm_arch_cas`), and this header derives the
 * rest.  A missing primitive stops the build here, not at run time.
 *
 * Must never happen in this file or in an arch module's header: a call
 * into the C library (the x86 module also runs in a freestanding K6 test
 * program; a module's arch_init.c may ask libc about the CPU, as arm64 does
 * with getauxval), a lock, or a memory order weaker than its name says.
 *
 * The contract (what each primitive guarantees)
 * ---------------------------------------------
 * Word: pcm_word_t, an unsigned integer as wide as a pointer.  Every word
 * operated on atomically is naturally aligned.
 *
 * [arch] pcm_arch_load_relaxed(p)      single-copy atomic load, no ordering.
 * [arch] pcm_arch_load_acquire(p)      load; later loads and stores of this
 *                                      thread are not performed before it.
 * [arch] pcm_arch_store_relaxed(p, v)  single-copy atomic store, no ordering.
 * [arch] pcm_arch_store_release(p, v)  store; earlier loads and stores of
 *                                      this thread are performed before it.
 * [arch] pcm_arch_cas(p, &expected, desired) -> bool
 *        Compare-and-swap, acquire and release ordering (acq_rel).  On
 *        success *p was expected and is now desired.  On failure *p is left
 *        alone and `expected` is updated to the value seen, so a retry loop
 *        needs no separate load (a module may also store the same value
 *        there on success).  Never fails spuriously.  A failed CAS
 *        has acquire order only (nothing was stored to release).
 * [arch] pcm_arch_cas2(p, &expected, desired) -> bool
 *        The same on a pcm_pair_t (two adjacent words, aligned to twice the
 *        word size): cmpxchg8b on i586, cmpxchg16b on x86_64, ldaxp/stlxp or
 *        caspal on arm64.  On failure `expected` receives the pair as it was
 *        at one instant: this is the only atomic way to read a pair on i586,
 *        where two word loads may tear.  It may write even when it fails
 *        (cmpxchg8b/16b and the ldaxp/stlxp store-back do): never use it on
 *        read-only memory.
 * [arch] pcm_arch_swap(p, v) -> old    exchange, acq_rel.
 * [arch] pcm_arch_fetch_add(p, v) -> old  wrapping add, acq_rel.
 *        The acq_rel read-modify-writes are not full fences on arm64: a
 *        later load may be performed before the RMW's store is visible.  A
 *        store->load pattern (Dekker, hazard pointers) needs fence_full.
 * [arch] pcm_arch_fence_full()     orders all earlier loads and stores before
 *                                  all later ones (store->load included).
 * [arch] pcm_arch_fence_acquire()  earlier loads before later loads/stores.
 * [arch] pcm_arch_fence_release()  earlier loads/stores before later stores.
 * [arch] pcm_arch_cpu_relax()      spin-wait hint (pause / yield); orders no
 *                                  memory access, but is a compiler barrier
 *                                  so a spin loop re-reads what it polls.
 * [arch] PCM_ARCH_CACHE_LINE       bytes to pad hot shared data against
 *                                  false sharing.
 * [arch] PCM_ARCH_NAME             "x86", "x86_64", "arm64", "generic".
 * [opt]  pcm_arch_init() -> const char *
 *        Start-up check of what the primitives need from the CPU (the
 *        cmpxchg16b CPUID bit, the choice of LSE or LL/SC).  Returns NULL if
 *        the primitives can be used, else a message for the caller to print.
 *        Idempotent; safe to call from any thread, before anything else.
 *        Derived as "nothing to check" where the module has none.
 * [opt]  pcm_arch_variant_count(), pcm_arch_variant_name(i),
 *        pcm_arch_variant_select(i), pcm_arch_variant_current()
 *        A module with several implementations of the primitives (arm64:
 *        LL/SC and LSE) lists those the running CPU supports; tests run every
 *        primitive under each.  pcm_arch_init detects once and never undoes
 *        a later select; select must not run while other threads use the
 *        primitives.  Derived as a single variant named
 *        PCM_ARCH_VARIANT_NAME where the module has one; a module that
 *        defines pcm_arch_variant_count defines all four.
 *
 * Derived here (only if the module did not supply a faster one):
 *        pcm_fetch_sub, pcm_cas_acquire, pcm_cas_release, pcm_pair_make.
 *
 * Names carry their memory order (pcm_load_acquire, pcm_cas_acq_rel, ...),
 * never an argument, so a reader sees the ordering at the call.
 */
#ifndef PCM_ATOMIC_H
#define PCM_ATOMIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uintptr_t pcm_word_t;

#if UINTPTR_MAX == 0xffffffffu
typedef uint64_t pcm_dword_t;
#else
__extension__ typedef unsigned __int128 pcm_dword_t;
#endif

/*
 * An ABA-safe (pointer, tag) pair, changed only as a whole by cas2.  `ptr`
 * is the low-addressed word on every supported (little-endian) target, so
 * `full` is ptr | tag << word_bits.
 */
typedef union pcm_pair {
    struct {
        pcm_word_t ptr;
        pcm_word_t tag;
    } half;
    pcm_dword_t full;
} __attribute__((aligned(2 * sizeof(pcm_word_t)))) pcm_pair_t;

_Static_assert(sizeof(pcm_pair_t) == 2 * sizeof(pcm_word_t), "pair is two words");
_Static_assert(_Alignof(pcm_pair_t) == 2 * sizeof(pcm_word_t),
               "cmpxchg8b/16b and ldaxp need a pair aligned to its size");

#define PCM_ATOMIC_INSIDE 1
#include "arch_atomic.h"
#undef PCM_ATOMIC_INSIDE

#ifndef pcm_arch_load_relaxed
#error "arch module is missing pcm_arch_load_relaxed"
#endif
#ifndef pcm_arch_load_acquire
#error "arch module is missing pcm_arch_load_acquire"
#endif
#ifndef pcm_arch_store_relaxed
#error "arch module is missing pcm_arch_store_relaxed"
#endif
#ifndef pcm_arch_store_release
#error "arch module is missing pcm_arch_store_release"
#endif
#ifndef pcm_arch_cas
#error "arch module is missing pcm_arch_cas"
#endif
#ifndef pcm_arch_cas2
#error "arch module is missing pcm_arch_cas2"
#endif
#ifndef pcm_arch_swap
#error "arch module is missing pcm_arch_swap"
#endif
#ifndef pcm_arch_fetch_add
#error "arch module is missing pcm_arch_fetch_add"
#endif
#ifndef pcm_arch_fence_full
#error "arch module is missing pcm_arch_fence_full"
#endif
#ifndef pcm_arch_fence_acquire
#error "arch module is missing pcm_arch_fence_acquire"
#endif
#ifndef pcm_arch_fence_release
#error "arch module is missing pcm_arch_fence_release"
#endif
#ifndef pcm_arch_cpu_relax
#error "arch module is missing pcm_arch_cpu_relax"
#endif
#ifndef PCM_ARCH_CACHE_LINE
#error "arch module is missing PCM_ARCH_CACHE_LINE"
#endif
#ifndef PCM_ARCH_NAME
#error "arch module is missing PCM_ARCH_NAME"
#endif

#ifndef pcm_arch_init
static inline const char *pcm_arch_init(void)
{
    return NULL; /* the module needs nothing from the CPU beyond its ISA */
}
#define pcm_arch_init pcm_arch_init
#endif

#ifndef pcm_arch_variant_count
#ifndef PCM_ARCH_VARIANT_NAME
#error "single-variant arch module is missing PCM_ARCH_VARIANT_NAME"
#endif
static inline unsigned pcm_arch_variant_count(void)
{
    return 1;
}
static inline const char *pcm_arch_variant_name(unsigned index)
{
    return index == 0 ? PCM_ARCH_VARIANT_NAME : NULL;
}
static inline bool pcm_arch_variant_select(unsigned index)
{
    return index == 0;
}
static inline unsigned pcm_arch_variant_current(void)
{
    return 0;
}
#define pcm_arch_variant_count pcm_arch_variant_count
#endif

/* ---- The names src/ uses: the order is in the name. ---- */

#define pcm_load_relaxed(p)        pcm_arch_load_relaxed(p)
#define pcm_load_acquire(p)        pcm_arch_load_acquire(p)
#define pcm_store_relaxed(p, v)    pcm_arch_store_relaxed((p), (v))
#define pcm_store_release(p, v)    pcm_arch_store_release((p), (v))
#define pcm_cas_acq_rel(p, e, d)   pcm_arch_cas((p), (e), (d))
#define pcm_cas2_acq_rel(p, e, d)  pcm_arch_cas2((p), (e), (d))
#define pcm_swap_acq_rel(p, v)     pcm_arch_swap((p), (v))
#define pcm_fetch_add_acq_rel(p, v) pcm_arch_fetch_add((p), (v))
#define pcm_fence_full()           pcm_arch_fence_full()
#define pcm_fence_acquire()        pcm_arch_fence_acquire()
#define pcm_fence_release()        pcm_arch_fence_release()
#define pcm_cpu_relax()            pcm_arch_cpu_relax()
#define PCM_CACHE_LINE             PCM_ARCH_CACHE_LINE

/* A CAS that only needs one side of the ordering may use a cheaper
 * instruction where the module has one; otherwise the acq_rel one serves. */
#ifdef pcm_arch_cas_acquire
#define pcm_cas_acquire(p, e, d) pcm_arch_cas_acquire((p), (e), (d))
#else
#define pcm_cas_acquire(p, e, d) pcm_arch_cas((p), (e), (d))
#endif
#ifdef pcm_arch_cas_release
#define pcm_cas_release(p, e, d) pcm_arch_cas_release((p), (e), (d))
#else
#define pcm_cas_release(p, e, d) pcm_arch_cas((p), (e), (d))
#endif

#ifdef pcm_arch_fetch_sub
#define pcm_fetch_sub_acq_rel(p, v) pcm_arch_fetch_sub((p), (v))
#else
/* Two's complement: adding -v subtracts v, wrapping like the hardware. */
#define pcm_fetch_sub_acq_rel(p, v) pcm_arch_fetch_add((p), (pcm_word_t)0 - (pcm_word_t)(v))
#endif

static inline pcm_pair_t pcm_pair_make(pcm_word_t ptr, pcm_word_t tag)
{
    pcm_pair_t pair;
    pair.half.ptr = ptr;
    pair.half.tag = tag;
    return pair;
}

/*
 * A pair read with two relaxed word loads.  It may be torn (each half from a
 * different instant); it is only ever used as the first `expected` of a
 * cas2 loop, where a torn value simply fails the CAS and is replaced by the
 * true pair.  Never act on it otherwise.
 */
static inline pcm_pair_t pcm_pair_load_torn(const volatile pcm_pair_t *p)
{
    pcm_pair_t pair;
    pair.half.ptr = pcm_load_relaxed(&p->half.ptr);
    pair.half.tag = pcm_load_relaxed(&p->half.tag);
    return pair;
}

#endif /* PCM_ATOMIC_H */
