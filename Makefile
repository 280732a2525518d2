# pcmalloc - build for one architecture at a time; outputs in build/<ARCH>/.
#
#   make                       the host architecture
#   make ARCH=x86|x86_64|arm64|generic [CROSS_COMPILE=prefix-]
#   make test [ARCH=...]       that build's tests (cross builds under qemu-user)
#   make test-hardened [ARCH=...]   the hardened build's tests (mk/hardened.mk)
#   make test-all              every architecture, one summary line at the end
#   make run                   real programs with pcmalloc preloaded, vs glibc
#   make bench                 the benchmarks against the peers (build/bench/results.md)
#   make bench-quick           the same at tiny sizes (part of test-all)
#   make bench-compare BEFORE=<commit>   this build beside that commit's (mk/bench_compare.mk)
#   make deps                  install (apt-get) what building and testing need
#   make install [PREFIX=/usr/local DESTDIR=]   the library, header, pkg-config
#                              file, pcmalloc command and man page (mk/drop_in.mk)
#   make uninstall             the same files, removed
#   make test-drop-in          the command, options, statistics and install as a
#                              user meets them (part of test-all)
#   make test-vm ARCH=arm64|x86   that build's tests on a whole emulated 4-CPU
#                              machine with Debian's kernel (mk/vm.mk; not in test-all)
#   make test-vm-all           both machines, one summary line at the end

HOST_MACHINE := $(shell uname -m)
HOST_ARCH := $(patsubst i%86,x86,$(patsubst aarch64,arm64,$(HOST_MACHINE)))
ARCH ?= $(HOST_ARCH)

ifeq ($(filter $(ARCH),x86 x86_64 arm64 generic),)
$(error ARCH must be one of x86 x86_64 arm64 generic, not '$(ARCH)')
endif

# The Debian cross compilers, unless the host already is that architecture.
CROSS_COMPILE.x86 := i686-linux-gnu-
CROSS_COMPILE.arm64 := aarch64-linux-gnu-
CROSS_COMPILE.x86_64 := x86_64-linux-gnu-
ifeq ($(ARCH),$(HOST_ARCH))
CROSS_COMPILE ?=
else ifeq ($(ARCH),generic)
CROSS_COMPILE ?=
else
CROSS_COMPILE ?= $(CROSS_COMPILE.$(ARCH))
endif

# The version, from the public header: the soname carries the major number
# (libpcmalloc.so.1), the installed file the whole one (libpcmalloc.so.1.0).
VERSION_MAJOR := $(shell sed -n 's/^\#define PCMALLOC_VERSION_MAJOR \([0-9]*\)$$/\1/p' include/pcmalloc.h)
VERSION_MINOR := $(shell sed -n 's/^\#define PCMALLOC_VERSION_MINOR \([0-9]*\)$$/\1/p' include/pcmalloc.h)
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR)
SONAME := libpcmalloc.so.$(VERSION_MAJOR)
ifeq ($(VERSION_MAJOR)$(VERSION_MINOR),)
$(error no PCMALLOC_VERSION_MAJOR/MINOR found in include/pcmalloc.h)
endif

CC := $(CROSS_COMPILE)gcc
AR := $(CROSS_COMPILE)ar
OBJDUMP := $(CROSS_COMPILE)objdump
# BUILD=... keeps a variant (other EXTRA_CFLAGS) apart from the normal build.
BUILD ?= build/$(ARCH)

# i586 (K6-class): no cmov, no SSE; -mtune=k6 only schedules.
ARCH_CFLAGS.x86 := -march=i586 -mtune=k6
ARCH_CFLAGS.arm64 := -march=armv8-a
ARCH_LIBS.generic := -latomic

WARN := -Wall -Wextra -Werror
BASE_CFLAGS := -std=c11 -O2 -g $(WARN) -D_GNU_SOURCE $(ARCH_CFLAGS.$(ARCH)) \
               -Iinclude -Isrc -Iarch/$(ARCH) -Itests/harness $(EXTRA_CFLAGS)
LIB_CFLAGS := $(BASE_CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec
# EXTRA_LDFLAGS: what a variant's links need too (-fsanitize=...).
LIBS := -lpthread $(ARCH_LIBS.$(ARCH)) $(EXTRA_LDFLAGS)

LIB_SRC := $(sort $(wildcard src/*.c)) $(sort $(wildcard arch/$(ARCH)/*.c))
# api.c goes into the library as api_names.o, which also names malloc and
# free (aliases of pcm_malloc and pcm_free: src/api.c).
LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out src/api.c,$(LIB_SRC))) $(BUILD)/obj/src/api_names.o
# Tests link the allocator without the interposition layer: they call the
# pcm_* names, and the harness keeps using libc's malloc.
INTERPOSITION_OBJ := $(addprefix $(BUILD)/obj/src/,preload.o preload_cxx.o api_names.o)
CORE_OBJ := $(filter-out $(INTERPOSITION_OBJ),$(LIB_OBJ)) $(BUILD)/obj/src/api.o
HEADERS := $(wildcard include/*.h src/*.h arch/$(ARCH)/*.h tests/harness/*.h tests/*/*.h)

HARNESS_SRC := tests/harness/harness.c tests/harness/platform_libc.c
HARNESS_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(HARNESS_SRC))

# tests/arch/*.c form one binary (they also form the freestanding K6 one);
# every other tests/<group>/<name>.c is a binary of its own.
ARCH_TEST_SRC := $(sort $(wildcard tests/arch/*.c))
ARCH_TEST_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(ARCH_TEST_SRC))
# tests/<group>/<name>.c -> build/<ARCH>/tests/<group>_<name>, linked with
# the allocator's objects (groups: unit, stress, misuse).
GROUP_TEST_SRC := $(sort $(wildcard tests/unit/*.c tests/stress/*.c tests/misuse/*.c))
GROUP_TESTS := $(foreach src,$(GROUP_TEST_SRC),$(BUILD)/tests/$(subst /,_,$(patsubst tests/%.c,%,$(src))))
# tests/preload/<name>.c -> build/<ARCH>/preload/<name>: plain programs that
# the runner starts with LD_PRELOAD=libpcmalloc.so.
PRELOAD_TEST_SRC := $(sort $(wildcard tests/preload/*.c))
PRELOAD_TESTS := $(patsubst tests/preload/%.c,$(BUILD)/preload/%,$(PRELOAD_TEST_SRC))
# tests/abi/link.c, linked the two ways users link: libpcmalloc.a, -lpcmalloc.
ABI_TESTS := $(BUILD)/tests/abi_static_link $(BUILD)/tests/abi_shared_link
TESTS := $(BUILD)/tests/arch $(GROUP_TESTS) $(PRELOAD_TESTS) $(ABI_TESTS)

# The K6 program: the same arch tests, no libc, raw system calls.
K6_SRC := tests/harness/harness.c tests/harness/platform_freestanding_x86.c \
          $(wildcard tests/harness/start_freestanding_x86.S) src/format.c \
          $(wildcard arch/x86/*.c) $(ARCH_TEST_SRC)
K6_CFLAGS := -std=c11 -O2 $(WARN) -march=i586 -mtune=k6 -ffreestanding -fno-stack-protector \
             -fno-pie -no-pie -static -nostdlib -Isrc -Iarch/x86 -Itests/harness

# V=1 shows every command; by default one short line per step.
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
say = $(if $(filter 1,$(V)),,@echo "  $(1) $(2)")

# Objects of pattern-rule chains are kept, so a second make is a no-op.
.SECONDARY:

.PHONY: all lib tests test test-all deps clean run bench bench-quick
all: lib tests

lib: $(BUILD)/libpcmalloc.so $(BUILD)/$(SONAME) $(BUILD)/libpcmalloc.a

tests: $(TESTS) $(if $(filter x86,$(ARCH)),$(BUILD)/k6/arch_freestanding $(BUILD)/k6/cmov_canary)

# Install missing tools first, but only when one is missing.
NEED_DEPS := $(if $(shell command -v $(CC) 2>/dev/null),,deps)
ifneq ($(ARCH),$(HOST_ARCH))
ifneq ($(ARCH),generic)
NEED_DEPS := $(if $(shell command -v qemu-$(patsubst x86,i386,$(patsubst arm64,aarch64,$(ARCH))) 2>/dev/null),$(NEED_DEPS),deps)
endif
endif

deps:
	scripts/deps.sh

$(BUILD)/obj/%.o: %.c $(HEADERS) | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) $(LIB_CFLAGS) -c $< -o $@

$(BUILD)/obj/src/api_names.o: src/api.c $(HEADERS) | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) $(LIB_CFLAGS) -DPCM_STANDARD_NAMES -c $< -o $@

# No unwind tables in the library: nothing unwinds through its C frames,
# and .eh_frame would be resident in every process (the kernel maps the
# library's read-only pages whole).  A sanitizer's variant keeps them.
$(LIB_OBJ): LIB_CFLAGS += $(if $(findstring -fsanitize,$(EXTRA_CFLAGS)),,-fno-asynchronous-unwind-tables -fno-unwind-tables)
# operator new hands a failure on to the C++ runtime's, which may throw
# through it: its frames need unwind tables on every target.
$(BUILD)/obj/src/preload_cxx.o: LIB_CFLAGS += -fexceptions

$(BUILD)/libpcmalloc.so: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,nodelete -Wl,-Bsymbolic-functions -o $@ $^ $(LIBS)

# The soname: what programs linked with -lpcmalloc load.
$(BUILD)/$(SONAME): $(BUILD)/libpcmalloc.so
	$(Q)ln -sf libpcmalloc.so $@

$(BUILD)/libpcmalloc.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(BUILD)/tests/arch: $(ARCH_TEST_OBJ) $(HARNESS_OBJ) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) -o $@ $(ARCH_TEST_OBJ) $(HARNESS_OBJ) $(CORE_OBJ) $(LIBS)

define group_test_rule
$(BUILD)/tests/$(1)_%: $(BUILD)/obj/tests/$(1)/%.o $(HARNESS_OBJ) $(CORE_OBJ)
	@mkdir -p $$(dir $$@)
	$(call say,CC,$$@)
	$(Q)$$(CC) -o $$@ $$< $(HARNESS_OBJ) $(CORE_OBJ) $(LIBS) -ldl
endef
$(foreach group,unit stress misuse,$(eval $(call group_test_rule,$(group))))

$(BUILD)/preload/%: $(BUILD)/obj/tests/preload/%.o $(HARNESS_OBJ) $(BUILD)/obj/src/format.o
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) -o $@ $< $(HARNESS_OBJ) $(BUILD)/obj/src/format.o $(LIBS) -ldl

$(BUILD)/tests/abi_static_link: $(BUILD)/obj/tests/abi/link.o $(HARNESS_OBJ) $(BUILD)/libpcmalloc.a
	$(call say,CC,$@)
	$(Q)$(CC) -o $@ $< $(HARNESS_OBJ) $(BUILD)/libpcmalloc.a $(LIBS)

# The harness formats with src/format.c, hidden inside the shared library.
$(BUILD)/tests/abi_shared_link: $(BUILD)/obj/tests/abi/link.o $(HARNESS_OBJ) $(BUILD)/obj/src/format.o $(BUILD)/$(SONAME)
	$(call say,CC,$@)
	$(Q)$(CC) -o $@ $< $(HARNESS_OBJ) $(BUILD)/obj/src/format.o -L$(BUILD) -l:libpcmalloc.so \
	    -Wl,-rpath,'$$ORIGIN/..' $(LIBS)

$(BUILD)/k6/arch_freestanding: $(K6_SRC) $(HEADERS) | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) $(K6_CFLAGS) -o $@ $(K6_SRC) -lgcc

$(BUILD)/k6/cmov_canary: tests/k6/cmov_canary.c | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) $(K6_CFLAGS) -o $@ $< -lgcc

# Each run writes its counts under RESULTS; test-all keeps going past a
# failing architecture and judges them all at the end.
RESULTS ?= $(BUILD)/results
test: all
	@rm -rf $(RESULTS)/$(ARCH)-*
	OBJDUMP=$(OBJDUMP) NM=$(CROSS_COMPILE)nm READELF=$(CROSS_COMPILE)readelf RESULTS=$(RESULTS) qemu/run-tests.sh $(ARCH) $(BUILD)
	@qemu/summarize.sh $(RESULTS) $(ARCH)-

# Builds run one compiler per CPU (unless the caller gave make its own -j,
# seen in MAKEFLAGS when a recipe expands this): on 2 CPUs the four
# architectures' builds took 75 s one file at a time and 37 s this way, the
# host's lib, hardened, ubsan, fuzz and rseq-simulation builds 53 s and 28 s.
# The suites' tests still run one binary at a time - each suite target's
# tests are one recipe after its builds - so no test competes with another.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
PARALLEL_BUILD = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(BUILD_JOBS))

test-all:
	@rm -rf build/results && mkdir -p build/results
	-@for arch in x86_64 x86 arm64 generic; do \
	    if $(MAKE) --no-print-directory $(PARALLEL_BUILD) all ARCH=$$arch; then \
	        $(MAKE) --no-print-directory test ARCH=$$arch RESULTS=build/results || true; \
	    else echo "== [$$arch] the build failed: counted as a failure"; \
	        echo "build 0 1" > build/results/$$arch-build.txt; fi; done
	-@for suite in $(TEST_ALL_EXTRA); do \
	    $(MAKE) --no-print-directory $(PARALLEL_BUILD) $$suite RESULTS=build/results || true; done
	@echo "== [bench] make bench-quick (every benchmark, every allocator, tiny sizes)"
	-@if $(MAKE) --no-print-directory $(PARALLEL_BUILD) bench-quick ARCH=$(HOST_ARCH) \
	    > build/results/bench-quick.log 2>&1; \
	  then echo "bench_quick 1 0" > build/results/bench-quick.txt; \
	  else echo "bench_quick 0 1" > build/results/bench-quick.txt; fi; tail -n 5 build/results/bench-quick.log
	@qemu/summarize.sh build/results

# The main job: real programs with pcmalloc preloaded, beside glibc.
run: lib
	@scripts/deps.sh python3 perl
	scripts/demo.sh $(BUILD)/libpcmalloc.so

ifneq ($(filter bench bench-quick,$(MAKECMDGOALS)),)
ifneq ($(ARCH),$(HOST_ARCH))
$(error make bench runs the host build only: drop ARCH=$(ARCH))
endif
endif

# Benchmarks of the host build against glibc, jemalloc, tcmalloc and mimalloc:
# build/bench/results.md and its plots (bench/README.md; BENCH_QUICK=1: a one-minute smoke test).
bench: lib rseq-simulation-lib
	scripts/bench_deps.sh
	BENCH_PCMALLOC_CALLGRIND=$(RSEQ_SIMULATION_LIB) python3 bench/run.py $(BUILD)/libpcmalloc.so build/bench

# The library callgrind counts pcmalloc's fast path with: valgrind has no
# rseq, and this build (src/cpu.c, PCM_RSEQ_SIMULATION) then runs the rseq
# path as CPU 0 - correct single-threaded only, so used for nothing else.
RSEQ_SIMULATION_LIB := build/rseq-simulation/libpcmalloc.so
.PHONY: rseq-simulation-lib
rseq-simulation-lib:
	@$(MAKE) --no-print-directory BUILD=build/rseq-simulation EXTRA_CFLAGS=-DPCM_RSEQ_SIMULATION $(RSEQ_SIMULATION_LIB)

# The same at tiny sizes, one repetition, failing on any crash or wrong
# checksum: part of test-all, so the benchmarks never rot. The runner's unit
# tests first; one variant (this build on its CAS fast path) keeps
# BENCH_VARIANTS, which make bench-compare relies on, from rotting too, and
# another runs every benchmark on the hardened library (mk/hardened.mk).
# Threaded benchmarks at 1, 2 and 16 threads and 4 pinned to one CPU (4
# and 8 threads run no code these do not, and took 35 s of its 2.1
# minutes).
bench-quick: lib rseq-simulation-lib
	scripts/bench_deps.sh
	python3 bench/test_variants.py
	python3 bench/test_report.py
	python3 bench/test_overlap.py
	python3 bench/test_plot.py
	BENCH_QUICK=1 BENCH_STRICT=1 BENCH_THREADS="1 2 16" \
	    BENCH_VARIANTS=pcmalloc-cas=$(BUILD)/libpcmalloc.so:PCMALLOC_RSEQ=0,pcmalloc-hardened=$(BUILD)/libpcmalloc-hardened.so \
	    BENCH_PCMALLOC_CALLGRIND=$(RSEQ_SIMULATION_LIB) python3 bench/run.py $(BUILD)/libpcmalloc.so build/bench-quick

clean:
	rm -rf build

# Further suites and targets, one file each (mk/<topic>.mk).  A file adds
# its suite's target to TEST_ALL_EXTRA; test-all runs it with
# RESULTS=build/results, and the suite writes $(RESULTS)/<name>.txt, one line
# "<test> <passed> <failed>" per test, for qemu/summarize.sh.
TEST_ALL_EXTRA :=
include $(sort $(wildcard mk/*.mk))
