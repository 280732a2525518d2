/*
 * arch/arm64/arch_init.c - choosing LSE or LL/SC for the arm64 primitives.
 *
 * getauxval is the one C library call of the arm64 module: the kernel's
 * HWCAP word is how user space learns whether the CPU has LSE.
 */
#include <sys/auxv.h>

#include "atomic.h"

#ifndef HWCAP_ATOMICS
#define HWCAP_ATOMICS (1UL << 8) /* the arm64 Linux ABI value */
#endif

pcm_word_t pcm_arm64_lse; /* 0 (LL/SC) until pcm_arch_init finds LSE */

/* Variants the CPU supports: 0 until detected, then 1 (LL/SC) or 2. */
static pcm_word_t pcm_arm64_variants;

static const char *const pcm_arm64_variant_names[] = {"llsc", "lse"};

const char *pcm_arch_init(void)
{
    /* Detect once, so a later call does not undo pcm_arch_variant_select.
     * The release publishes pcm_arm64_lse with the count. */
    if (pcm_arch_load_acquire(&pcm_arm64_variants) == 0) {
        pcm_word_t lse = (getauxval(AT_HWCAP) & HWCAP_ATOMICS) != 0;
        pcm_arch_store_relaxed(&pcm_arm64_lse, lse);
        pcm_arch_store_release(&pcm_arm64_variants, 1 + lse);
    }
    return NULL; /* LL/SC is in every ARMv8.0 CPU: nothing can be missing */
}

unsigned pcm_arch_variant_count(void)
{
    pcm_arch_init(); /* so the count is never the undetected 0 */
    return (unsigned)pcm_arch_load_relaxed(&pcm_arm64_variants);
}

const char *pcm_arch_variant_name(unsigned index)
{
    return index < pcm_arch_variant_count() ? pcm_arm64_variant_names[index] : NULL;
}

bool pcm_arch_variant_select(unsigned index)
{
    if (index >= pcm_arch_variant_count())
        return false;
    pcm_arch_store_relaxed(&pcm_arm64_lse, index);
    return true;
}

unsigned pcm_arch_variant_current(void)
{
    return (unsigned)pcm_arch_load_relaxed(&pcm_arm64_lse);
}
