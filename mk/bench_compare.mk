# make bench-compare BEFORE=<commit>: the benchmarks of this build beside an
# older commit's build (variant pcmalloc-before), interleaved in one run:
# build/bench-compare/results.md and its plots (bench/README.md). More
# variants through BENCH_VARIANTS, and every BENCH_* knob of make bench,
# apply. Not part of test-all: it is a full benchmark run.

BENCH_COMPARE_OUT := build/bench-compare

ifneq ($(filter bench-compare,$(MAKECMDGOALS)),)
ifneq ($(ARCH),$(HOST_ARCH))
$(error make bench-compare runs the host build only: drop ARCH=$(ARCH))
endif
endif

.PHONY: bench-compare
bench-compare: lib rseq-simulation-lib
	@test -n "$(BEFORE)" || { echo "make bench-compare: name the commit to compare with, e.g. BEFORE=HEAD~1" >&2; exit 2; }
	scripts/bench_deps.sh
	MAKE="$(MAKE)" ARCH=$(ARCH) BENCH_PCMALLOC_CALLGRIND=$(RSEQ_SIMULATION_LIB) \
	    scripts/bench_compare.sh "$(BEFORE)" $(BUILD)/libpcmalloc.so $(BENCH_COMPARE_OUT)
