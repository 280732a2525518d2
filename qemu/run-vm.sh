#!/usr/bin/env bash
# qemu/run-vm.sh ARCH BUILD - run BUILD's test suite on a whole emulated
# machine with 4 CPUs and Debian's own kernel of ARCH, where qemu-user
# cannot go: it has no rseq and no CPUs of the guest's own, so it cannot
# show that the per-CPU heaps, CPU selection and the restartable sequences
# behave on a real multi-CPU kernel.
#
#   arm64: qemu-system-aarch64 -M virt -cpu max, 4 CPUs;
#   x86:   qemu-system-i386 -cpu max (as Intel: QEMU gives an AMD model no
#          SMT), 4 CPUs as 2 cores x 2 threads, so the guest sees SMT
#          siblings;
# both with multi-threaded TCG (one host thread per virtual CPU).
#
# qemu/vm-fetch.sh fetches the kernel and busybox, qemu/vm-initramfs.sh
# packs them with the cross sysroot's C library and BUILD's binaries,
# the guest (qemu/vm-init.sh, qemu/vm-suite.sh) runs every test binary
# and reports over the serial console, then powers off.  The console goes
# to stdout and to build/vm/ARCH/console.log.  Counts go to
# $RESULTS/ARCH-vm.txt (qemu/summarize.sh's format): one line per guest
# binary, and one line `vm_boot_report_power_off` that fails when the
# guest's summary line is missing or disagrees with its binaries' lines,
# when the kernel panicked, or when the machine did not power off within
# PCM_VM_TIMEOUT seconds (570 by default: a run must end inside 10
# minutes).  Exit status non-zero when anything failed.
#
# Settings for the guest go on the kernel command line, which hands them
# to init as its environment: PCM_TEST_EXPECT_CPUS=4 (stress_cpu_spread
# must find the 4 CPUs, not skip), PCM_TEST_EXPECT_VARIANT on arm64,
# PCM_VM_FAST_PATHS (qemu/vm-suite.sh; below), PCM_TEST_THREADS and
# PCM_TEST_SCALE (8 and 50 percent, or PCM_VM_TEST_THREADS and
# PCM_VM_TEST_SCALE), PCM_TEST_PHASE_MIB=256 (stress_phase_trim's phase,
# as the 32-bit builds always run it: 1 GiB written four times took 76 of
# the arm64 guest's 192 s of tests), and PCM_VM_TEST_TIMEOUT when set.
# PCM_VM_EXTRA_ENV adds settings of its own (VAR=VALUE, space-separated),
# for chasing one failure: PCM_TEST_FILTER and PCM_TEST_SEED, or PCMALLOC_*
# options, with BUILD a folder of copies of the one test binary.
set -u
arch=$1
build=$2
results=${RESULTS:-build/results-vm}
vm_timeout=${PCM_VM_TIMEOUT:-570}
cpus=4
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."

case "$arch" in
arm64)
    debarch=arm64
    sysroot=/usr/aarch64-linux-gnu
    console=ttyAMA0
    # pauth-impdef: QEMU's cheap pointer-authentication hash instead of
    # the architected QARMA, which costs TCG much time on every return.
    machine=(qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp "$cpus")
    # -cpu max has LSE: the arch module must choose it.
    guest_env="PCM_TEST_EXPECT_VARIANT=lse"
    ;;
x86)
    debarch=i386
    sysroot=/usr/i686-linux-gnu
    console=ttyS0
    machine=(qemu-system-i386 -cpu max,vendor=GenuineIntel -smp "$cpus,sockets=1,cores=2,threads=2")
    guest_env=
    ;;
*)
    echo "run-vm.sh: ARCH must be arm64 or x86, not '$arch'" >&2
    exit 2
    ;;
esac
# Every binary on the fast path only a real kernel shows: the restartable
# sequences where the arch module defines them, else the CAS one.  The CAS
# path's suites run under qemu-user for both builds (arm64 on two CPU
# models), natively on x86_64 and generic, and in the hardened, UBSan and
# TSan builds; here a second pass took 152 of the two machines' 334 s of
# tests.  PCM_VM_FAST_PATHS=rseq,cas runs both.
fast_paths=cas
grep -qs '^#define PCM_ARCH_RSEQ\b' arch/"$arch"/*.h && fast_paths=rseq
guest_env="$guest_env PCM_VM_FAST_PATHS=${PCM_VM_FAST_PATHS:-$fast_paths}"
# Scaled down to fit 10 minutes on the 2-core machine, where each virtual
# CPU is a host thread (and the suite may run twice: both fast paths): the
# torture tests' threads to 8, two per virtual CPU (still more threads
# than CPUs, the point of those tests; the harness would take 16, and 8 is
# what the 2-core host runs), and iteration counts to half.  Ping-pong
# tests (fences, message passing) cost a host time slice per round when
# the host is busy: at full scale a loaded machine (load 20) ran past 10
# minutes.
guest_env="$guest_env PCM_TEST_THREADS=${PCM_VM_TEST_THREADS:-8} PCM_TEST_SCALE=${PCM_VM_TEST_SCALE:-50}"
guest_env="$guest_env PCM_TEST_EXPECT_CPUS=$cpus PCM_TEST_PHASE_MIB=256 ${PCM_VM_EXTRA_ENV:-}"
[ -n "${PCM_VM_TEST_TIMEOUT:-}" ] && guest_env="$guest_env PCM_VM_TEST_TIMEOUT=$PCM_VM_TEST_TIMEOUT"

mkdir -p "$results"
out=build/vm/$arch
mkdir -p "$out"
record_file=$results/$arch-vm.txt
rm -f "$record_file"

# fail_setup WHAT: the machine could not even be started.
fail_setup() {
    echo "  !! $1"
    echo "vm_boot_report_power_off 0 1" >>"$record_file"
    exit 1
}

echo "== [vm] qemu/vm-fetch.sh $debarch"
qemu/vm-fetch.sh "$debarch" || fail_setup "the $debarch kernel and busybox could not be fetched"
echo "== [vm] qemu/vm-initramfs.sh $build"
qemu/vm-initramfs.sh "$build" "$sysroot" "build/vm/$debarch/busybox" "$out/initramfs.cpio.gz" ||
    fail_setup "the initramfs could not be built"

echo "== [vm] ${machine[*]}, booting build/vm/$debarch/vmlinuz (time-out ${vm_timeout}s)"
start=$(date +%s)
# -no-reboot: a reboot (and a panic, with panic=-1) ends QEMU at once.
# Serial console on stdio, nothing read from stdin, its CRs dropped line
# by line (sed -u: tr would hold the console back in blocks, and a
# watcher would see nothing for minutes).  No network device:
# the guest needs none, and -nic none keeps QEMU from wanting its ROM.
timeout --kill-after=10 "$vm_timeout" "${machine[@]}" -m 2G -accel tcg,thread=multi \
    -kernel "build/vm/$debarch/vmlinuz" -initrd "$out/initramfs.cpio.gz" \
    -append "console=$console panic=-1 quiet $guest_env" \
    -display none -monitor none -serial stdio -nic none -no-reboot </dev/null 2>&1 |
    sed -u 's/\r//g' | tee "$out/console.log"
rc=${PIPESTATUS[0]}
seconds=$(($(date +%s) - start))

# What the guest reported, and what went wrong around it.
problems=()
passed=0
failed=0
grep -E '^PCM-VM-RESULT [^ ]+ [0-9]+ [0-9]+$' "$out/console.log" | cut -d ' ' -f 2- >>"$record_file"
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/console.log" | tail -n 1)
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    problems+=("the machine did not power off within ${vm_timeout}s")
elif [ "$rc" -ne 0 ]; then
    problems+=("QEMU exited with status $rc")
fi
if grep -q 'Kernel panic' "$out/console.log"; then
    problems+=("the kernel panicked: $(grep -m 1 'Kernel panic' "$out/console.log")")
fi
if [ -z "$summary" ]; then
    problems+=("no 'N passed, N failed' line from the guest")
else
    read -r passed failed < <(awk '{p += $2; f += $3} END {print p + 0, f + 0}' "$record_file")
    [ "$summary" = "$passed passed, $failed failed" ] ||
        problems+=("the guest's summary '$summary' disagrees with its binaries' lines ($passed passed, $failed failed)")
    [ "$passed" -gt 0 ] || problems+=("the guest ran no test")
fi
echo "== [vm] $arch: QEMU ran ${seconds}s, exit status $rc"
if [ ${#problems[@]} -eq 0 ]; then
    echo "vm_boot_report_power_off 1 0" >>"$record_file"
    echo "   [vm] booted, reported '$summary', powered off"
    [ "$failed" -eq 0 ]
    exit
fi
echo "vm_boot_report_power_off 0 1" >>"$record_file"
for problem in "${problems[@]}"; do
    echo "  !! $problem"
done
exit 1
