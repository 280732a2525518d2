#!/bin/sh
# qemu/vm-init.sh - /init of the whole-machine QEMU runs (qemu/run-vm.sh):
# PID 1 of the guest, under busybox sh, in the initramfs that
# qemu/vm-initramfs.sh builds.  It mounts what the tests need, says what
# machine the tests see (the host checks nothing of this: the test
# stress_cpu_spread does), runs the suite (/pcm/vm-suite.sh) and powers
# the machine off.
#
# It must never exit: PID 1 exiting panics the kernel.  Whatever the suite
# does, the last step is the power-off (and should even that fail, the
# kernel's panic=-1 and QEMU's -no-reboot end the run; the host then finds
# no summary line and fails it).
#
# The kernel passes the command line's unknown NAME=value words to init as
# its environment: that is how PCM_TEST_* and PCM_VM_* settings get here.
export PATH=/bin
# An initramfs has no /dev/console of its own (making the node needs root
# on the host): the kernel started us without a console, so open it here.
mount -t devtmpfs devtmpfs /dev
exec 0</dev/console 1>/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
cd /tmp

echo "== [vm] $(uname -sr) on $(uname -m), $(nproc) CPUs online ($(cat /sys/devices/system/cpu/online))"
for cpu in /sys/devices/system/cpu/cpu[0-9]*; do
    topology=$cpu/topology
    [ -d "$topology" ] || continue
    echo "   ${cpu##*/}: core $(cat "$topology/core_id"), package $(cat "$topology/physical_package_id"), SMT siblings $(cat "$topology/thread_siblings_list")"
done
echo "   memory: $(grep MemTotal /proc/meminfo)"

sh /pcm/vm-suite.sh
echo "== [vm] powering off"
poweroff -f
sleep 60
