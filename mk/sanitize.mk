# mk/sanitize.mk - the test suites again under the sanitizers, each build in
# a folder of its own (BUILD=build/ubsan, ...) beside the normal ones:
#
#   make test-ubsan   every test of the host build with UndefinedBehaviorSanitizer
#                     (-fno-sanitize-recover: the first report fails the test),
#                     on both fast paths (rseq where there is one, and CAS)
#   make test-ubsan-x86  the same for the i586 build under qemu-i386 (not in
#                     test-all: it adds a minute and a half; 32-bit sizes and
#                     shifts are where undefined arithmetic would show first)
#   make test-tsan    the arch torture tests and the stress tests of the
#                     ARCH=generic build (C11 atomics, which ThreadSanitizer
#                     models) under ThreadSanitizer, through the pcm_* API:
#                     TSan owns the malloc symbol itself, so nothing is preloaded
#
# Both are in test-all.  Deliberate races are suppressed, each by the name
# of the one function holding it, in tests/sanitize/tsan.supp.

UBSAN_DIR := build/ubsan
UBSAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=all
TSAN_DIR := build/tsan
# -Wno-tsan: GCC warns that TSan does not model atomic_thread_fence.  Only
# tests/arch/fence.c uses fences (src/ has none), on relaxed atomics.
TSAN_FLAGS := -fsanitize=thread -Wno-tsan
# The threaded tests: out_of_memory is single-threaded by design (its
# fault switch is a plain static) and forks ~70 children, each slow to
# start and end under TSan.  rseq_preemption sends each thread a signal
# every 20 us, and TSan's signal handling makes the full run take minutes:
# it runs at TSAN_PREEMPTION_SCALE percent of its operations.  phase_trim
# measures the resident set, which under TSan holds the shadow of every
# byte the phase touched (gigabytes TSan never gives back): left out, and
# cpu_move, which measures it too.
TSAN_LEFT_OUT := tests/stress/out_of_memory.c tests/stress/phase_trim.c tests/stress/cpu_move.c
TSAN_PREEMPTION := $(if $(wildcard tests/stress/rseq_preemption.c),$(TSAN_DIR)/tests/stress_rseq_preemption)
TSAN_PREEMPTION_SCALE ?= 5
TSAN_TESTS := $(TSAN_DIR)/tests/arch \
              $(filter-out $(TSAN_PREEMPTION),$(patsubst tests/stress/%.c,$(TSAN_DIR)/tests/stress_%,\
                  $(filter-out $(TSAN_LEFT_OUT),$(sort $(wildcard tests/stress/*.c)))))

.PHONY: test-ubsan test-ubsan-x86 test-tsan
TEST_ALL_EXTRA += test-ubsan test-tsan

# Twice, as the normal suite runs: on the fast path start-up picks
# (restartable sequences where the kernel has them) and on the CAS one.
test-ubsan:
	@$(MAKE) --no-print-directory all ARCH=$(HOST_ARCH) BUILD=$(UBSAN_DIR) \
	    EXTRA_CFLAGS="$(UBSAN_FLAGS)" EXTRA_LDFLAGS="$(UBSAN_FLAGS)"
	@UBSAN_OPTIONS=print_stacktrace=1 RESULTS=$(RESULTS) PRELOAD_LIB=$(abspath $(UBSAN_DIR))/libpcmalloc.so \
	    tests/sanitize/run.sh ubsan $(UBSAN_DIR)/tests/* $(UBSAN_DIR)/preload/*; s1=$$?; \
	UBSAN_OPTIONS=print_stacktrace=1 RESULTS=$(RESULTS) PRELOAD_LIB=$(abspath $(UBSAN_DIR))/libpcmalloc.so \
	    RUNNER="env PCMALLOC_RSEQ=0" tests/sanitize/run.sh ubsan-cas $(UBSAN_DIR)/tests/* $(UBSAN_DIR)/preload/*; \
	s2=$$?; [ $$s1 -eq 0 ] && [ $$s2 -eq 0 ]

test-ubsan-x86:
	@$(MAKE) --no-print-directory tests ARCH=x86 BUILD=$(UBSAN_DIR)-x86 \
	    EXTRA_CFLAGS="$(UBSAN_FLAGS)" EXTRA_LDFLAGS="$(UBSAN_FLAGS)"
	@UBSAN_OPTIONS=print_stacktrace=1 RESULTS=$(RESULTS) \
	    RUNNER="env QEMU_LD_PREFIX=/usr/i686-linux-gnu qemu-i386 -E LD_LIBRARY_PATH=/usr/i686-linux-gnu/lib" \
	    tests/sanitize/run.sh ubsan-x86 $(UBSAN_DIR)-x86/tests/*

TSAN_RUN_OPTIONS := suppressions=$(abspath tests/sanitize/tsan.supp) history_size=7 second_deadlock_stack=1

test-tsan:
	@$(MAKE) --no-print-directory ARCH=generic BUILD=$(TSAN_DIR) \
	    EXTRA_CFLAGS="$(TSAN_FLAGS)" EXTRA_LDFLAGS="-fsanitize=thread" $(TSAN_TESTS) $(TSAN_PREEMPTION)
	@TSAN_OPTIONS="$(TSAN_RUN_OPTIONS)" RESULTS=$(RESULTS) tests/sanitize/run.sh tsan $(TSAN_TESTS); s1=$$?; \
	TSAN_OPTIONS="$(TSAN_RUN_OPTIONS)" RESULTS=$(RESULTS) RUNNER="env PCM_TEST_SCALE=$(TSAN_PREEMPTION_SCALE)" \
	    tests/sanitize/run.sh tsan-preemption $(TSAN_PREEMPTION); s2=$$?; [ $$s1 -eq 0 ] && [ $$s2 -eq 0 ]
