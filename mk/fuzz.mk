# mk/fuzz.mk - the libFuzzer harness of the pcm_* API (tests/fuzz/api_fuzz.c),
# built with Debian's clang and its fuzzer runtime into build/fuzz/:
#
#   make test-fuzz          replay the seed corpus and every saved regression
#                           input, then fuzz for FUZZ_TEST_SECONDS (30) on each CPU: in test-all
#   make fuzz               a long run (FUZZ_SECONDS, 3600), growing
#                           build/fuzz/corpus; crashes land in build/fuzz/crashes/
#
# A crash input found by either goes into tests/fuzz/regressions/ (named for
# what it caught) and is replayed by every test-fuzz from then on.  The
# allocator's objects are built with coverage and ASan + UBSan; the harness
# calls the pcm_* names (no src/preload.c), so libFuzzer and ASan keep the C
# library's malloc.

FUZZ_DIR := build/fuzz
FUZZ_CC := clang
FUZZ_SANITIZE := address,undefined
FUZZ_CFLAGS := -fsanitize=fuzzer-no-link,$(FUZZ_SANITIZE) -fno-sanitize-recover=undefined
FUZZ_TEST_SECONDS ?= 30
FUZZ_SECONDS ?= 3600
FUZZ_JOBS ?= 1
FUZZ_BINARY := $(FUZZ_DIR)/fuzz/api_fuzz
FUZZ_SEEDS := tests/fuzz/corpus
FUZZ_REGRESSIONS := tests/fuzz/regressions
# Inputs are programs of up to 512 operations of a few bytes each.
FUZZ_OPTIONS := -max_len=4096 -timeout=20 -rss_limit_mb=4096

.PHONY: test-fuzz fuzz fuzz-build
TEST_ALL_EXTRA += test-fuzz

# Linked in a make run with BUILD=$(FUZZ_DIR) CC=$(FUZZ_CC) (fuzz-build).
$(BUILD)/fuzz/%: $(BUILD)/obj/tests/fuzz/%.o $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) -fsanitize=fuzzer,$(FUZZ_SANITIZE) -o $@ $^ $(LIBS)

fuzz-build:
	@scripts/deps.sh clang libclang-rt-14-dev >/dev/null
	@$(MAKE) --no-print-directory ARCH=$(HOST_ARCH) BUILD=$(FUZZ_DIR) CC=$(FUZZ_CC) \
	    EXTRA_CFLAGS="$(FUZZ_CFLAGS)" $(FUZZ_BINARY)

test-fuzz: fuzz-build
	@RESULTS=$(RESULTS) FUZZ_OPTIONS="$(FUZZ_OPTIONS)" tests/fuzz/run.sh $(FUZZ_BINARY) \
	    $(FUZZ_TEST_SECONDS) $(FUZZ_SEEDS) $(FUZZ_REGRESSIONS)

fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/crashes
	$(FUZZ_BINARY) $(FUZZ_OPTIONS) -max_total_time=$(FUZZ_SECONDS) -jobs=$(FUZZ_JOBS) -workers=$(FUZZ_JOBS) \
	    -artifact_prefix=$(FUZZ_DIR)/crashes/ $(FUZZ_DIR)/corpus $(FUZZ_SEEDS) $(FUZZ_REGRESSIONS)
