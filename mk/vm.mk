# mk/vm.mk - the cross builds' test suites on whole emulated machines with
# 4 CPUs and Debian's own kernels (qemu/run-vm.sh), where qemu-user shows
# neither rseq nor the guest's own CPUs:
#
#   make test-vm ARCH=arm64|x86   one machine; counts in build/results-vm/<ARCH>-vm.txt
#   make test-vm-all              both, then their summary ("N passed, N failed" last)
#
# Not part of test-all, which must stay quick: a VM run takes minutes (each
# must end within 10; qemu/run-vm.sh stops it at 9.5).  CI (.ci/run) runs
# test-vm-all after test-all.  The first run downloads each kernel and
# busybox (qemu/vm-fetch.sh, cached under build/vm/) and installs QEMU.
VM_ARCHS := arm64 x86
VM_PACKAGES.arm64 := qemu-system-arm cpio
VM_PACKAGES.x86 := qemu-system-x86 cpio
RESULTS_VM ?= build/results-vm

ifneq ($(filter test-vm,$(MAKECMDGOALS)),)
ifeq ($(filter $(ARCH),$(VM_ARCHS)),)
$(error make test-vm needs ARCH=arm64 or ARCH=x86, not '$(ARCH)')
endif
endif

.PHONY: test-vm test-vm-all

# The summary is printed even when the run failed; the status is the run's.
test-vm: all
	@scripts/deps.sh $(VM_PACKAGES.$(ARCH))
	@RESULTS=$(RESULTS_VM) qemu/run-vm.sh $(ARCH) $(BUILD); status=$$?; \
	  qemu/summarize.sh $(RESULTS_VM) $(ARCH)-vm && exit $$status

# Keeps going past a failing machine and judges both at the end.  A run
# that wrote no counts at all (its build or QEMU's install failed) counts
# as one failure, so the summary cannot pass without it.
test-vm-all:
	@rm -rf $(RESULTS_VM)
	-@for arch in $(VM_ARCHS); do \
	    $(MAKE) --no-print-directory $(PARALLEL_BUILD) test-vm ARCH=$$arch RESULTS_VM=$(RESULTS_VM) || true; \
	    [ -s $(RESULTS_VM)/$$arch-vm.txt ] || { mkdir -p $(RESULTS_VM); \
	      echo "vm_boot_report_power_off 0 1" > $(RESULTS_VM)/$$arch-vm.txt; }; done
	@qemu/summarize.sh $(RESULTS_VM)
