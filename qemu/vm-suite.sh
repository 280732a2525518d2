#!/bin/sh
# qemu/vm-suite.sh - the test suite inside a whole-machine QEMU guest
# (busybox sh; /init, qemu/vm-init.sh, runs it): every test binary of the
# build under /pcm/tests, and every program under /pcm/preload with
# LD_PRELOAD=/pcm/libpcmalloc.so.  Both are globbed, so a test added to
# the build is picked up without touching this file.
#
# Once per fast path in PCM_VM_FAST_PATHS (comma-separated, "cas" when
# unset; qemu/run-vm.sh gives "rseq" where the arch module has restartable
# sequences, or what its caller set): "rseq" runs as the allocator chooses
# on this kernel, "cas" with PCMALLOC_RSEQ=0, and each with
# PCM_TEST_EXPECT_FAST_PATH naming the path the allocator must have chosen
# (tests/unit/fast_path.c checks it).
# Except `arch`, which runs on the first path only: it checks the arch
# module's primitives, which no fast path changes, and its ping-pong
# tests are the slowest thing in a VM on a busy host (each round needs
# two virtual CPUs running at once: up to 150 s a run).
#
# What it prints, for qemu/run-vm.sh to read off the serial console:
#   - each binary's own output, indented (so no line of it can be taken
#     for one of ours);
#   - per binary "PCM-VM-RESULT <path>/<name> <passed> <failed>", at
#     column 0;
#   - last, "N passed, N failed" for them all, at column 0.
# A binary that dies, times out (PCM_VM_TEST_TIMEOUT seconds, 300 by
# default) or prints no summary of its own counts as one failure, so a
# crash can never pass: the same rules as qemu/run-tests.sh.
timeout_s=${PCM_VM_TEST_TIMEOUT:-300}
total_passed=0
total_failed=0
ran=0

# run_binary PATH KIND BINARY [PRELOAD]: run one harness binary on fast
# path PATH and report it.
run_binary() {
    path=$1
    kind=$2
    binary=$3
    preload=$4
    name=$path/${binary##*/}
    echo "== [vm-$kind] $name"
    start=$(date +%s)
    rseq=1
    [ "$path" = cas ] && rseq=0
    env PCMALLOC_RSEQ=$rseq PCM_TEST_EXPECT_FAST_PATH="$path" ${preload:+LD_PRELOAD=$preload} \
        timeout "$timeout_s" "$binary" >/tmp/log 2>&1
    rc=$?
    sed 's/^/  /' /tmp/log
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/log | tail -n 1)
    passed=0
    failed=0
    if [ -n "$summary" ]; then
        passed=${summary%% passed*}
        failed=${summary#*passed, }
        failed=${failed%% failed*}
    fi
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        echo "  !! $name exited with status $rc (time-out after ${timeout_s}s shows as 143 or 137)"
        failed=1
    elif [ -z "$summary" ]; then
        echo "  !! $name printed no summary line"
        failed=1
    fi
    echo "PCM-VM-RESULT $name $passed $failed"
    echo "   [vm-$kind] $name: $passed ok, $failed not ok, $(($(date +%s) - start)) s"
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
    ran=$((ran + 1))
}

IFS=,
set -- ${PCM_VM_FAST_PATHS:-cas}
unset IFS
for path in "$@"; do
    for binary in /pcm/tests/*; do
        [ "${binary##*/}" = arch ] && [ "$path" != "$1" ] && continue
        [ -f "$binary" ] && [ -x "$binary" ] && run_binary "$path" tests "$binary"
    done
    for binary in /pcm/preload/*; do
        [ -f "$binary" ] && [ -x "$binary" ] && run_binary "$path" preload "$binary" /pcm/libpcmalloc.so
    done
done
echo "== [vm] $ran runs of a binary (fast paths: $*)"
echo "$total_passed passed, $total_failed failed"
