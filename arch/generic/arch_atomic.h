/*
 * arch/generic/arch_atomic.h - the primitives on C11 <stdatomic.h>.
 *
 * The reference implementation (the oracle the hand-written modules are
 * tested against, and the build ThreadSanitizer understands).  The 16-byte
 * compare-and-swap goes through libatomic (-latomic), which uses cmpxchg16b
 * where the CPU has it.  Words are accessed through _Atomic-qualified
 * casts of the plain words src/ declares; GCC gives _Atomic uintptr_t the
 * size and alignment of uintptr_t on every target we build.
 */
#ifndef PCM_ATOMIC_INSIDE
#error "include src/atomic.h, not an arch module's header"
#endif

#include <stdatomic.h>

#define PCM_ARCH_NAME "generic"
#define PCM_ARCH_CACHE_LINE 64

typedef _Atomic pcm_word_t pcm_generic_word_t;
typedef _Atomic pcm_dword_t pcm_generic_dword_t;

_Static_assert(sizeof(pcm_generic_word_t) == sizeof(pcm_word_t), "atomic word size");
_Static_assert(sizeof(pcm_generic_dword_t) == sizeof(pcm_pair_t), "atomic pair size");

#define PCM_GENERIC_WORD(p) ((volatile pcm_generic_word_t *)(p))

static inline pcm_word_t pcm_arch_load_relaxed(const volatile pcm_word_t *p)
{
    return atomic_load_explicit((volatile pcm_generic_word_t *)(uintptr_t)p, memory_order_relaxed);
}
#define pcm_arch_load_relaxed pcm_arch_load_relaxed

static inline pcm_word_t pcm_arch_load_acquire(const volatile pcm_word_t *p)
{
    return atomic_load_explicit((volatile pcm_generic_word_t *)(uintptr_t)p, memory_order_acquire);
}
#define pcm_arch_load_acquire pcm_arch_load_acquire

static inline void pcm_arch_store_relaxed(volatile pcm_word_t *p, pcm_word_t v)
{
    atomic_store_explicit(PCM_GENERIC_WORD(p), v, memory_order_relaxed);
}
#define pcm_arch_store_relaxed pcm_arch_store_relaxed

static inline void pcm_arch_store_release(volatile pcm_word_t *p, pcm_word_t v)
{
    atomic_store_explicit(PCM_GENERIC_WORD(p), v, memory_order_release);
}
#define pcm_arch_store_release pcm_arch_store_release

static inline bool pcm_arch_cas(volatile pcm_word_t *p, pcm_word_t *expected, pcm_word_t desired)
{
    /* strong: the contract has no spurious failure */
    return atomic_compare_exchange_strong_explicit(PCM_GENERIC_WORD(p), expected, desired,
                                                   memory_order_acq_rel, memory_order_acquire);
}
#define pcm_arch_cas pcm_arch_cas

static inline bool pcm_arch_cas2(volatile pcm_pair_t *p, pcm_pair_t *expected, pcm_pair_t desired)
{
    return atomic_compare_exchange_strong_explicit((volatile pcm_generic_dword_t *)&p->full,
                                                   &expected->full, desired.full,
                                                   memory_order_acq_rel, memory_order_acquire);
}
#define pcm_arch_cas2 pcm_arch_cas2

static inline pcm_word_t pcm_arch_swap(volatile pcm_word_t *p, pcm_word_t v)
{
    return atomic_exchange_explicit(PCM_GENERIC_WORD(p), v, memory_order_acq_rel);
}
#define pcm_arch_swap pcm_arch_swap

static inline pcm_word_t pcm_arch_fetch_add(volatile pcm_word_t *p, pcm_word_t v)
{
    return atomic_fetch_add_explicit(PCM_GENERIC_WORD(p), v, memory_order_acq_rel);
}
#define pcm_arch_fetch_add pcm_arch_fetch_add

static inline void pcm_arch_fence_full(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}
#define pcm_arch_fence_full pcm_arch_fence_full

static inline void pcm_arch_fence_acquire(void)
{
    atomic_thread_fence(memory_order_acquire);
}
#define pcm_arch_fence_acquire pcm_arch_fence_acquire

static inline void pcm_arch_fence_release(void)
{
    atomic_thread_fence(memory_order_release);
}
#define pcm_arch_fence_release pcm_arch_fence_release

/* C11 has no spin hint; a compiler barrier keeps the loop re-reading. */
static inline void pcm_arch_cpu_relax(void)
{
    atomic_signal_fence(memory_order_seq_cst);
}
#define pcm_arch_cpu_relax pcm_arch_cpu_relax

#define PCM_ARCH_VARIANT_NAME "c11"
