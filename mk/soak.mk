# mk/soak.mk - the soak test: tests/soak/soak.c, mixed allocations under
# thread churn with every block's contents checked, run with the host
# build's libpcmalloc.so preloaded (tests/soak/run.sh).
#
#   make soak                  10 minutes (SOAK_SECONDS=n to change), with
#                              the real programs in a loop beside it
#                              (SOAK_PROGRAMS=0 to leave them out); not in CI
#   make soak-short            20 seconds, soak program only: part of test-all

SOAK_SECONDS ?= 600
SOAK_PROGRAMS ?= 1
SOAK_BIN := $(BUILD)/soak/soak

ifneq ($(filter soak soak-short,$(MAKECMDGOALS)),)
ifneq ($(ARCH),$(HOST_ARCH))
$(error make soak runs the host build only: drop ARCH=$(ARCH))
endif
endif

# A plain program: it calls malloc, which the preloaded library serves.
$(SOAK_BIN): tests/soak/soak.c | $(NEED_DEPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) $(BASE_CFLAGS) -o $@ $< -lpthread -ldl

.PHONY: soak soak-short
soak: lib $(SOAK_BIN)
	SOAK_PROGRAMS=$(SOAK_PROGRAMS) tests/soak/run.sh $(BUILD)/libpcmalloc.so $(SOAK_BIN) $(SOAK_SECONDS) $(RESULTS)

soak-short: lib $(SOAK_BIN)
	SOAK_PROGRAMS=0 tests/soak/run.sh $(BUILD)/libpcmalloc.so $(SOAK_BIN) 20 $(RESULTS)

TEST_ALL_EXTRA += soak-short
