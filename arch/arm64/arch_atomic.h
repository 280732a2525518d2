/*
 * arch/arm64/arch_atomic.h - the primitives in AArch64 inline assembly.
 *
 * Plain loads and stores are ldr/str (relaxed) and ldar/stlr (acquire,
 * release).  Each read-modify-write has two implementations:
 *   pcm_arm64_*_llsc  exclusive-monitor loops (ldaxr/stlxr, ldaxp/stlxp),
 *                     present on every ARMv8.0 CPU;
 *   pcm_arm64_*_lse   the ARMv8.1 Large System Extension single instructions
 *                     (casal, caspal, swpal, ldaddal), which need no retry
 *                     loop and scale better under contention.
 * pcm_arch_* picks one by pcm_arm64_lse, which pcm_arch_init
 * (arch_init.c) sets from HWCAP_ATOMICS.  Its zero default is LL/SC, valid
 * on every CPU, so a primitive used before pcm_arch_init still works.
 *
 * The LSE mnemonics are enabled inside each asm string with
 * `.arch_extension lse`, so the file builds with -march=armv8-a and the
 * compiler itself never emits an LSE instruction.
 *
 * Each acq_rel RMW is an acquire load plus a release store (ldaxr/stlxr, or
 * an -al instruction): the compiler's own mapping of C11 acq_rel and
 * seq_cst read-modify-writes.  Every asm that orders other accesses
 * clobbers "memory" so the compiler cannot move accesses across it either.
 */
#ifndef PCM_ATOMIC_INSIDE
#error "include src/atomic.h, not an arch module's header"
#endif

#define PCM_ARCH_NAME "arm64"

/*
 * 128, not 64: Cortex and Neoverse cores have 64-byte lines, but Apple
 * M-series and Cavium ThunderX have 128-byte ones, and one arm64 binary
 * runs on all of them.  (GCC's aarch64 default for
 * --param destructive-interference-size is even 256, which also covers
 * A64FX's 256-byte lines; one HPC part is not worth that much padding.)
 * Padding hot per-CPU data to 128 costs a little memory; false sharing
 * costs far more.
 */
#define PCM_ARCH_CACHE_LINE 128

/* Nonzero: the RMWs use LSE.  Written only by arch_init.c (pcm_arch_init,
 * pcm_arch_variant_select); never changed while other threads run RMWs. */
extern pcm_word_t pcm_arm64_lse __attribute__((visibility("hidden")));

const char *pcm_arch_init(void);
#define pcm_arch_init pcm_arch_init

/* Variant i runs with pcm_arm64_lse == i: 0 "llsc", 1 "lse" (LSE CPUs). */
unsigned pcm_arch_variant_count(void);
const char *pcm_arch_variant_name(unsigned index);
bool pcm_arch_variant_select(unsigned index);
unsigned pcm_arch_variant_current(void);
#define pcm_arch_variant_count pcm_arch_variant_count

/* ---- Loads and stores ---- */

/* v = *p; one ldr of an aligned word is single-copy atomic.  No "memory"
 * clobber: relaxed orders nothing else; the operand names the word. */
static inline pcm_word_t pcm_arch_load_relaxed(const volatile pcm_word_t *p)
{
    pcm_word_t v;
    __asm__ __volatile__("ldr %0, %1" : "=r"(v) : "m"(*p));
    return v;
}
#define pcm_arch_load_relaxed pcm_arch_load_relaxed

/* v = *p (acquire); ldar keeps every later access after it.  ldar takes
 * only a base register: "Q". */
static inline pcm_word_t pcm_arch_load_acquire(const volatile pcm_word_t *p)
{
    pcm_word_t v;
    __asm__ __volatile__("ldar %0, %1" : "=r"(v) : "Q"(*p) : "memory");
    return v;
}
#define pcm_arch_load_acquire pcm_arch_load_acquire

/* *p = v; "rZ" lets a zero be stored from xzr. */
static inline void pcm_arch_store_relaxed(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("str %x1, %0" : "=m"(*p) : "rZ"(v));
}
#define pcm_arch_store_relaxed pcm_arch_store_relaxed

/* *p = v (release); stlr keeps every earlier access before it. */
static inline void pcm_arch_store_release(volatile pcm_word_t *p, pcm_word_t v)
{
    __asm__ __volatile__("stlr %x1, %0" : "=Q"(*p) : "rZ"(v) : "memory");
}
#define pcm_arch_store_release pcm_arch_store_release

/* ---- Compare-and-swap of a word ---- */

/*
 * for (;;) {
 *     old = *p;                                  (ldaxr: acquire, exclusive)
 *     if (old != exp) { clrex; break; }          (fail: drop the monitor)
 *     if (store-exclusive(p, desired)) break;    (stlxr: release)
 * }                                              (lost the monitor: retry)
 * Retrying a failed stlxr, never reporting it, makes the CAS strong.
 */
static inline bool pcm_arm64_cas_llsc(volatile pcm_word_t *p, pcm_word_t *expected,
                                      pcm_word_t desired)
{
    pcm_word_t exp = *expected, old;
    uint32_t lost;
    __asm__ __volatile__("1:  ldaxr   %[old], %[mem]\n"
                         "    cmp     %[old], %x[exp]\n"
                         "    b.ne    2f\n"
                         "    stlxr   %w[lost], %x[des], %[mem]\n"
                         "    cbnz    %w[lost], 1b\n"
                         "    b       3f\n"
                         "2:  clrex\n"
                         "3:\n"
                         : [old] "=&r"(old), [lost] "=&r"(lost), [mem] "+Q"(*p)
                         : [exp] "rZ"(exp), [des] "rZ"(desired)
                         : "memory", "cc");
    if (old == exp)
        return true;
    *expected = old;
    return false;
}

/* old = exp; atomically { seen = *p; if (seen == old) *p = desired; }
 * old = seen.  casal: acquire load; release store (no store on failure). */
static inline bool pcm_arm64_cas_lse(volatile pcm_word_t *p, pcm_word_t *expected,
                                     pcm_word_t desired)
{
    pcm_word_t exp = *expected, old = exp;
    __asm__ __volatile__(".arch_extension lse\n"
                         "casal   %[old], %x[des], %[mem]"
                         : [old] "+r"(old), [mem] "+Q"(*p)
                         : [des] "rZ"(desired)
                         : "memory");
    if (old == exp)
        return true;
    *expected = old;
    return false;
}

static inline bool pcm_arch_cas(volatile pcm_word_t *p, pcm_word_t *expected, pcm_word_t desired)
{
    if (pcm_arm64_lse)
        return pcm_arm64_cas_lse(p, expected, desired);
    return pcm_arm64_cas_llsc(p, expected, desired);
}
#define pcm_arch_cas pcm_arch_cas

/* ---- Compare-and-swap of a pair ---- */

/*
 * for (;;) {
 *     (lo, hi) = *p;                               (ldaxp: acquire)
 *     new = (lo, hi) == exp ? desired : (lo, hi);
 *     if (store-exclusive(p, new)) break;          (stlxp: release)
 * }
 * On a mismatch the pair seen is stored back unchanged: ldaxp alone is not
 * single-copy atomic for 128 bits; only a successful store-exclusive to the
 * same address proves both halves were read at one instant (Arm ARM,
 * "single-copy atomicity" of LDXP/STXP).  That store also ends the
 * exclusive monitor, so no clrex is needed.
 */
static inline bool pcm_arm64_cas2_llsc(volatile pcm_pair_t *p, pcm_pair_t *expected,
                                       pcm_pair_t desired)
{
    pcm_pair_t exp = *expected;
    pcm_word_t lo, hi;
    uint32_t lost;
    __asm__ __volatile__("1:  ldaxp   %[lo], %[hi], %[mem]\n"
                         "    cmp     %[lo], %x[elo]\n"
                         "    ccmp    %[hi], %x[ehi], #0, eq\n"
                         "    b.ne    2f\n"
                         "    stlxp   %w[lost], %x[dlo], %x[dhi], %[mem]\n"
                         "    cbnz    %w[lost], 1b\n"
                         "    b       3f\n"
                         "2:  stlxp   %w[lost], %[lo], %[hi], %[mem]\n"
                         "    cbnz    %w[lost], 1b\n"
                         "3:\n"
                         : [lo] "=&r"(lo), [hi] "=&r"(hi), [lost] "=&r"(lost), [mem] "+Q"(*p)
                         : [elo] "rZ"(exp.half.ptr), [ehi] "rZ"(exp.half.tag),
                           [dlo] "rZ"(desired.half.ptr), [dhi] "rZ"(desired.half.tag)
                         : "memory", "cc");
    if (lo == exp.half.ptr && hi == exp.half.tag)
        return true;
    expected->half.ptr = lo;
    expected->half.tag = hi;
    return false;
}

/*
 * (x0, x1) = exp; atomically { seen = *p; if (seen == (x0, x1)) *p = (x2, x3); }
 * (x0, x1) = seen.  caspal wants each pair in an even/odd register pair,
 * hence the explicit registers; the first (even) register holds the
 * low-addressed word, `ptr`.
 */
static inline bool pcm_arm64_cas2_lse(volatile pcm_pair_t *p, pcm_pair_t *expected,
                                      pcm_pair_t desired)
{
    pcm_pair_t exp = *expected;
    register pcm_word_t x0 __asm__("x0") = exp.half.ptr;
    register pcm_word_t x1 __asm__("x1") = exp.half.tag;
    register pcm_word_t x2 __asm__("x2") = desired.half.ptr;
    register pcm_word_t x3 __asm__("x3") = desired.half.tag;
    __asm__ __volatile__(".arch_extension lse\n"
                         "caspal  %[o0], %[o1], %[d0], %[d1], %[mem]"
                         : [o0] "+r"(x0), [o1] "+r"(x1), [mem] "+Q"(*p)
                         : [d0] "r"(x2), [d1] "r"(x3)
                         : "memory");
    if (x0 == exp.half.ptr && x1 == exp.half.tag)
        return true;
    expected->half.ptr = x0;
    expected->half.tag = x1;
    return false;
}

static inline bool pcm_arch_cas2(volatile pcm_pair_t *p, pcm_pair_t *expected, pcm_pair_t desired)
{
    if (pcm_arm64_lse)
        return pcm_arm64_cas2_lse(p, expected, desired);
    return pcm_arm64_cas2_llsc(p, expected, desired);
}
#define pcm_arch_cas2 pcm_arch_cas2

/* ---- Swap and fetch-add ---- */

/* do { old = *p; } while (!store-exclusive(p, v));  ldaxr/stlxr: acq_rel */
static inline pcm_word_t pcm_arm64_swap_llsc(volatile pcm_word_t *p, pcm_word_t v)
{
    pcm_word_t old;
    uint32_t lost;
    __asm__ __volatile__("1:  ldaxr   %[old], %[mem]\n"
                         "    stlxr   %w[lost], %x[v], %[mem]\n"
                         "    cbnz    %w[lost], 1b\n"
                         : [old] "=&r"(old), [lost] "=&r"(lost), [mem] "+Q"(*p)
                         : [v] "rZ"(v)
                         : "memory");
    return old;
}

/* atomically { old = *p; *p = v; }  swpal: acquire and release.  (The
 * acquire would be lost if old went to xzr; an "=r" output never does.) */
static inline pcm_word_t pcm_arm64_swap_lse(volatile pcm_word_t *p, pcm_word_t v)
{
    pcm_word_t old;
    __asm__ __volatile__(".arch_extension lse\n"
                         "swpal   %x[v], %[old], %[mem]"
                         : [old] "=r"(old), [mem] "+Q"(*p)
                         : [v] "rZ"(v)
                         : "memory");
    return old;
}

static inline pcm_word_t pcm_arch_swap(volatile pcm_word_t *p, pcm_word_t v)
{
    if (pcm_arm64_lse)
        return pcm_arm64_swap_lse(p, v);
    return pcm_arm64_swap_llsc(p, v);
}
#define pcm_arch_swap pcm_arch_swap

/* do { old = *p; } while (!store-exclusive(p, old + v));  wraps mod 2^64 */
static inline pcm_word_t pcm_arm64_fetch_add_llsc(volatile pcm_word_t *p, pcm_word_t v)
{
    pcm_word_t old, sum;
    uint32_t lost;
    __asm__ __volatile__("1:  ldaxr   %[old], %[mem]\n"
                         "    add     %[sum], %[old], %[v]\n"
                         "    stlxr   %w[lost], %[sum], %[mem]\n"
                         "    cbnz    %w[lost], 1b\n"
                         : [old] "=&r"(old), [sum] "=&r"(sum), [lost] "=&r"(lost), [mem] "+Q"(*p)
                         : [v] "r"(v)
                         : "memory");
    return old;
}

/* atomically { old = *p; *p = old + v; }  ldaddal: acquire and release. */
static inline pcm_word_t pcm_arm64_fetch_add_lse(volatile pcm_word_t *p, pcm_word_t v)
{
    pcm_word_t old;
    __asm__ __volatile__(".arch_extension lse\n"
                         "ldaddal %x[v], %[old], %[mem]"
                         : [old] "=r"(old), [mem] "+Q"(*p)
                         : [v] "rZ"(v)
                         : "memory");
    return old;
}

static inline pcm_word_t pcm_arch_fetch_add(volatile pcm_word_t *p, pcm_word_t v)
{
    if (pcm_arm64_lse)
        return pcm_arm64_fetch_add_lse(p, v);
    return pcm_arm64_fetch_add_llsc(p, v);
}
#define pcm_arch_fetch_add pcm_arch_fetch_add

/* ---- Fences (inner shareable: all CPUs the threads run on) ---- */

/* Every earlier access before every later one, store->load included. */
static inline void pcm_arch_fence_full(void)
{
    __asm__ __volatile__("dmb ish" ::: "memory");
}
#define pcm_arch_fence_full pcm_arch_fence_full

/* ishld: earlier loads before later loads and stores. */
static inline void pcm_arch_fence_acquire(void)
{
    __asm__ __volatile__("dmb ishld" ::: "memory");
}
#define pcm_arch_fence_acquire pcm_arch_fence_acquire

/* Full dmb ish: ishst orders only store->store, and release must also keep
 * earlier loads before later stores. */
static inline void pcm_arch_fence_release(void)
{
    __asm__ __volatile__("dmb ish" ::: "memory");
}
#define pcm_arch_fence_release pcm_arch_fence_release

/* yield orders nothing in hardware; the "memory" clobber makes a spin loop
 * re-read what it waits on, as the generic module's compiler barrier does. */
static inline void pcm_arch_cpu_relax(void)
{
    __asm__ __volatile__("yield" ::: "memory");
}
#define pcm_arch_cpu_relax pcm_arch_cpu_relax
