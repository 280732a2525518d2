# mk/hardened.mk - the hardened build (src/hardening.h): the same sources
# compiled with -DPCM_HARDENED into build/<ARCH>/hardened/, its library
# copied beside the default one as build/<ARCH>/libpcmalloc-hardened.so
# (soname libpcmalloc-hardened.so.1).  `make` builds it, `make install`
# installs it, `pcmalloc --secure` preloads it.  A build of its own rather
# than a run-time switch: the default build's rseq fast path stays exactly
# as it is, not one instruction longer.
#
#   make test-hardened [ARCH=...]   that build's test suite, every binary
#                                   on the CAS fast path (qemu/run-tests.sh
#                                   ARCH DIR hardened); test-all runs it for
#                                   the host architecture

HARDENED_SONAME := libpcmalloc-hardened.so.$(VERSION_MAJOR)
HARDENED_DIR := $(BUILD)/hardened
HARDENED_MAKE = $(MAKE) -s --no-print-directory BUILD=$(HARDENED_DIR) SONAME=$(HARDENED_SONAME) \
                EXTRA_CFLAGS="$(EXTRA_CFLAGS) -DPCM_HARDENED"

.PHONY: test-hardened hardened-lib
TEST_ALL_EXTRA += test-hardened

# Only the normal build makes one: a variant (BUILD=..., the sanitizer and
# rseq-simulation builds, the hardened build itself) makes none of its own.
ifeq ($(BUILD),build/$(ARCH))
lib: hardened-lib

hardened-lib:
	+@$(HARDENED_MAKE) $(HARDENED_DIR)/libpcmalloc.so
	@cmp -s $(HARDENED_DIR)/libpcmalloc.so $(BUILD)/libpcmalloc-hardened.so || \
	    cp $(HARDENED_DIR)/libpcmalloc.so $(BUILD)/libpcmalloc-hardened.so
	@ln -sf libpcmalloc-hardened.so $(BUILD)/$(HARDENED_SONAME)

test-hardened:
	+@$(HARDENED_MAKE) all
	@rm -rf $(RESULTS)/$(ARCH)-hardened*
	OBJDUMP=$(OBJDUMP) NM=$(CROSS_COMPILE)nm RESULTS=$(RESULTS) qemu/run-tests.sh $(ARCH) $(HARDENED_DIR) hardened
	@qemu/summarize.sh $(RESULTS) $(ARCH)-hardened
endif
