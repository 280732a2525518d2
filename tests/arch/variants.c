/*
 * variants.c - the module's list of implementations and its start-up
 * choice.  The QEMU runner says which choice the CPU model must produce
 * (PCM_TEST_EXPECT_VARIANT: "llsc" on a Cortex-A57, "lse" on -cpu max), so
 * a module that picked the wrong path for the CPU fails here.
 */
#include "arch_test.h"

static bool same(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

PCM_TEST(arch_variants_listed_and_chosen)
{
    if (!arch_test_ready())
        return;
    unsigned count = pcm_arch_variant_count();
    PCM_REQUIRE(count >= 1, "no variant");
    unsigned chosen = pcm_arch_variant_current();
    PCM_CHECK(chosen < count, "current variant %u of %u", chosen, count);
    for (unsigned i = 0; i < count; i++)
        PCM_CHECK(pcm_arch_variant_name(i) != NULL, "variant %u has no name", i);
    PCM_CHECK(pcm_arch_variant_name(count) == NULL, "a name past the end");
    PCM_CHECK(!pcm_arch_variant_select(count), "selecting a variant past the end succeeded");
    pcm_test_printf("  arch %s: %u variant(s), start-up choice %s\n", PCM_ARCH_NAME, count,
                    pcm_arch_variant_name(chosen));
    const char *expect = pcm_test_getenv("PCM_TEST_EXPECT_VARIANT");
    if (expect && *expect)
        PCM_CHECK(same(pcm_arch_variant_name(chosen), expect), "start-up chose %s, the CPU calls for %s",
                  pcm_arch_variant_name(chosen), expect);
    PCM_CHECK(pcm_arch_variant_select(chosen), "re-selecting the start-up choice");
}
