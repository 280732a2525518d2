/*
 * arch/x86_64/arch_atomic.h - the primitives in x86_64 inline assembly.
 *
 * x86 is TSO: a plain load already has acquire order and a plain store
 * release order, so those need only a compiler barrier; every locked
 * instruction is a full barrier.  The one thing the CPU may lack is
 * cmpxchg16b (the very first x86_64 parts): pcm_arch_init checks its CPUID
 * bit and refuses to run without it.  No libc calls in here.
 */
#ifndef PCM_ATOMIC_INSIDE
#error "include src/atomic.h, not an arch module's header"
#endif
#ifndef __x86_64__
#error "arch/x86_64 built for another architecture"
#endif

#define PCM_ARCH_NAME "x86_64"
#define PCM_ARCH_VARIANT_NAME "lock-cmpxchg16b"
/* 64-byte lines; Intel's adjacent-line prefetcher pulls pairs, but padding
 * hot per-CPU data to 64 already keeps two CPUs' writes apart. */
#define PCM_ARCH_CACHE_LINE 64

/* C: return *p;  a mov; the "memory" clobber stops the compiler moving
 * other accesses across it, which is all TSO needs for acquire. */
static inline pcm_word_t pcm_arch_load_relaxed(const volatile pcm_word_t *p)
{
    pcm_word_t v;
    __asm__ __volatile__("movq %1, %0" : "=r"(v) : "m"(*p));
    return v;
}
#define pcm_arch_load_relaxed pcm_arch_load_relaxed

static inline pcm_word_t pcm_arch_load_acquire(const volatile pcm_word_t *p)
{
    pcm_word_t v;
    __asm__ __volatile__("movq %1, %0" : "=r"(v) : "m"(*p) : "memory");
    return v;
}
#define pcm_arch_load_acquire pcm_arch_load_acquire

/* C: *p = v;  a mov; TSO never reorders a store before earlier accesses. */
static inline void pcm_arch_store_relaxed(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("movq %1, %0" : "=m"(*p) : "r"(v));
}
#define pcm_arch_store_relaxed pcm_arch_store_relaxed

static inline void pcm_arch_store_release(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("movq %1, %0" : "=m"(*p) : "r"(v) : "memory");
}
#define pcm_arch_store_release pcm_arch_store_release

/* C: if (*p == *e) { *p = d; return 1; } else { *e = *p; return 0; }
 * lock cmpxchg compares with rax and leaves the value seen in rax. */
static inline bool pcm_arch_cas(volatile pcm_word_t *p, pcm_word_t *expected, pcm_word_t desired)
{
    bool ok;
    __asm__ __volatile__("lock; cmpxchgq %3, %1"
                         : "=@ccz"(ok), "+m"(*p), "+a"(*expected)
                         : "r"(desired)
                         : "memory");
    return ok;
}
#define pcm_arch_cas pcm_arch_cas

/* C: the same on 16 bytes.  cmpxchg16b compares rdx:rax with the 16-byte
 * aligned operand (it faults if misaligned: pcm_pair_t's alignment is
 * asserted in atomic.h) and, on failure, loads it into rdx:rax, atomically. */
static inline bool pcm_arch_cas2(volatile pcm_pair_t *p, pcm_pair_t *expected, pcm_pair_t desired)
{
    bool ok;
    __asm__ __volatile__("lock; cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*p), "+a"(expected->half.ptr), "+d"(expected->half.tag)
                         : "b"(desired.half.ptr), "c"(desired.half.tag)
                         : "memory");
    return ok;
}
#define pcm_arch_cas2 pcm_arch_cas2

/* C: old = *p; *p = v; return old;  xchg with memory is always locked. */
static inline pcm_word_t pcm_arch_swap(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("xchgq %0, %1" : "+r"(v), "+m"(*p) : : "memory");
    return v;
}
#define pcm_arch_swap pcm_arch_swap

/* C: old = *p; *p += v; return old; */
static inline pcm_word_t pcm_arch_fetch_add(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("lock; xaddq %0, %1" : "+r"(v), "+m"(*p) : : "memory", "cc");
    return v;
}
#define pcm_arch_fetch_add pcm_arch_fetch_add

/* A locked add of zero to the top of the stack is a full barrier and, on
 * most cores, cheaper than mfence (which also waits for non-temporal and
 * WC stores we never issue).  The stack line is already ours, so no line
 * bounces between CPUs. */
static inline void pcm_arch_fence_full(void)
{
    __asm__ __volatile__("lock; orq $0, (%%rsp)" : : : "memory", "cc");
}
#define pcm_arch_fence_full pcm_arch_fence_full

/* TSO: loads are not reordered with later loads or stores, and stores not
 * with earlier loads or stores, so acquire and release fences only have to
 * stop the compiler. */
static inline void pcm_arch_fence_acquire(void)
{
    __asm__ __volatile__("" : : : "memory");
}
#define pcm_arch_fence_acquire pcm_arch_fence_acquire

static inline void pcm_arch_fence_release(void)
{
    __asm__ __volatile__("" : : : "memory");
}
#define pcm_arch_fence_release pcm_arch_fence_release

/* pause: on SMT cores a spinning thread otherwise steals the sibling's
 * issue slots, and leaving the spin costs a memory-order machine clear. */
static inline void pcm_arch_cpu_relax(void)
{
    __asm__ __volatile__("pause" : : : "memory");
}
#define pcm_arch_cpu_relax pcm_arch_cpu_relax

/* CPUID leaf 1, ECX bit 13: CMPXCHG16B. */
static inline const char *pcm_arch_init(void)
{
    unsigned eax = 1, ebx, ecx = 0, edx;
    __asm__ __volatile__("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
    if (!(ecx & (1u << 13)))
        return "pcmalloc: this CPU lacks cmpxchg16b, which pcmalloc's x86_64 build needs";
    return NULL;
}
#define pcm_arch_init pcm_arch_init
