# mk/drop_in.mk - what a user installs: `make install` / `make uninstall`
# (PREFIX=/usr/local, DESTDIR= for staging), the `pcmalloc` wrapper command
# (also built into build/<ARCH>/ beside the library), the pkg-config file
# and the pcmalloc(7) man page; and their tests, `make test-drop-in` (part
# of test-all): tests/drop_in/, on the host build.
#
# Installed:
#   $(LIBDIR)/libpcmalloc.so.1.0          the shared library (soname libpcmalloc.so.1)
#   $(LIBDIR)/libpcmalloc.so.1            -> libpcmalloc.so.1.0 (what programs load)
#   $(LIBDIR)/libpcmalloc.so              -> libpcmalloc.so.1   (what -lpcmalloc finds)
#   $(LIBDIR)/libpcmalloc.a
#   $(LIBDIR)/libpcmalloc-hardened.so.1.0 the hardened build (mk/hardened.mk), for pcmalloc --secure
#   $(LIBDIR)/libpcmalloc-hardened.so.1   -> libpcmalloc-hardened.so.1.0
#   $(LIBDIR)/pkgconfig/pcmalloc.pc
#   $(INCLUDEDIR)/pcmalloc.h
#   $(BINDIR)/pcmalloc
#   $(MANDIR)/man7/pcmalloc.7
# Never here: anything written outside $(DESTDIR)$(PREFIX)'s directories
# above, or an uninstall that removes files it did not install.

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR ?=
INSTALL ?= install
REALNAME := libpcmalloc.so.$(VERSION)
HARDENED_REALNAME := libpcmalloc-hardened.so.$(VERSION)

# @NAME@ placeholders of tools/*.in and docs/*.in.
SUBSTITUTE = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@SONAME@|$(SONAME)|g' \
                 -e 's|@HARDENED_SONAME@|$(HARDENED_SONAME)|g' \
                 -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
                 -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g'

.PHONY: install uninstall test-drop-in

lib: $(BUILD)/pcmalloc $(BUILD)/pcmalloc.pc $(BUILD)/pcmalloc.7

# PREFIX and LIBDIR are baked into the wrapper and the .pc file: rebuild
# them when those change (the stamp holds the last values).
$(BUILD)/install-dirs: FORCE
	@mkdir -p $(dir $@)
	@echo '$(VERSION) $(PREFIX) $(LIBDIR) $(INCLUDEDIR)' | cmp -s - $@ 2>/dev/null || \
	    echo '$(VERSION) $(PREFIX) $(LIBDIR) $(INCLUDEDIR)' > $@
.PHONY: FORCE
FORCE:

$(BUILD)/pcmalloc: tools/pcmalloc.in $(BUILD)/install-dirs
	$(call say,GEN,$@)
	$(Q)$(SUBSTITUTE) $< > $@.tmp && chmod 755 $@.tmp && mv $@.tmp $@

$(BUILD)/pcmalloc.pc: tools/pcmalloc.pc.in $(BUILD)/install-dirs
	$(call say,GEN,$@)
	$(Q)$(SUBSTITUTE) $< > $@

$(BUILD)/pcmalloc.7: docs/pcmalloc.7.in $(BUILD)/install-dirs
	$(call say,GEN,$@)
	$(Q)$(SUBSTITUTE) $< > $@

install: lib
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	    $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(MANDIR)/man7
	$(INSTALL) -m 755 $(BUILD)/libpcmalloc.so $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libpcmalloc.so
	$(INSTALL) -m 644 $(BUILD)/libpcmalloc.a $(DESTDIR)$(LIBDIR)/libpcmalloc.a
	$(INSTALL) -m 755 $(BUILD)/libpcmalloc-hardened.so $(DESTDIR)$(LIBDIR)/$(HARDENED_REALNAME)
	ln -sf $(HARDENED_REALNAME) $(DESTDIR)$(LIBDIR)/$(HARDENED_SONAME)
	$(INSTALL) -m 644 $(BUILD)/pcmalloc.pc $(DESTDIR)$(PKGCONFIGDIR)/pcmalloc.pc
	$(INSTALL) -m 644 include/pcmalloc.h $(DESTDIR)$(INCLUDEDIR)/pcmalloc.h
	$(INSTALL) -m 755 $(BUILD)/pcmalloc $(DESTDIR)$(BINDIR)/pcmalloc
	$(INSTALL) -m 644 $(BUILD)/pcmalloc.7 $(DESTDIR)$(MANDIR)/man7/pcmalloc.7
	@# A system-wide install: let the dynamic linker's cache see the soname.
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libpcmalloc.so $(DESTDIR)$(LIBDIR)/libpcmalloc.a \
	    $(DESTDIR)$(LIBDIR)/$(HARDENED_REALNAME) $(DESTDIR)$(LIBDIR)/$(HARDENED_SONAME) \
	    $(DESTDIR)$(PKGCONFIGDIR)/pcmalloc.pc $(DESTDIR)$(INCLUDEDIR)/pcmalloc.h \
	    $(DESTDIR)$(BINDIR)/pcmalloc $(DESTDIR)$(MANDIR)/man7/pcmalloc.7
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

# The wrapper, options, statistics and install as a user meets them
# (about 10 s).  RESULTS/drop-in.txt for qemu/summarize.sh.
TEST_ALL_EXTRA += test-drop-in
test-drop-in:
	@$(MAKE) --no-print-directory lib ARCH=$(HOST_ARCH)
	@scripts/deps.sh pkgconf groff-base dash python3 >/dev/null
	@tests/drop_in/run.sh build/$(HOST_ARCH) $(RESULTS)
