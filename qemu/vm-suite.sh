#!/bin/sh
# qemu/vm-suite.sh - the test suite inside a whole-machine QEMU guest
# (busybox sh; /init, qemu/vm-init.sh, runs it): every test binary of the
# build under /pcm/tests, and every program under /pcm/preload with
# LD_PRELOAD=/pcm/libpcmalloc.so.  Both are globbed, so a test added to
# the build is picked up without touching this file.
#
# What it prints, for qemu/run-vm.sh to read off the serial console:
#   - each binary's own output, indented (so no line of it can be taken
#     for one of ours);
#   - per binary "PCM-VM-RESULT <name> <passed> <failed>", at column 0;
#   - last, "N passed, N failed" for them all, at column 0.
# A binary that dies, times out (PCM_VM_TEST_TIMEOUT seconds, 300 by
# default) or prints no summary of its own counts as one failure, so a
# crash can never pass: the same rules as qemu/run-tests.sh.
timeout_s=${PCM_VM_TEST_TIMEOUT:-300}
total_passed=0
total_failed=0
ran=0

# run_binary KIND BINARY [PRELOAD]: run one harness binary and report it.
run_binary() {
    kind=$1
    binary=$2
    preload=$3
    name=${binary##*/}
    echo "== [vm-$kind] $name"
    start=$(date +%s)
    if [ -n "$preload" ]; then
        LD_PRELOAD=$preload timeout "$timeout_s" "$binary" >/tmp/log 2>&1
    else
        timeout "$timeout_s" "$binary" >/tmp/log 2>&1
    fi
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

for binary in /pcm/tests/*; do
    [ -f "$binary" ] && [ -x "$binary" ] && run_binary tests "$binary"
done
for binary in /pcm/preload/*; do
    [ -f "$binary" ] && [ -x "$binary" ] && run_binary preload "$binary" /pcm/libpcmalloc.so
done
echo "== [vm] $ran binaries"
echo "$total_passed passed, $total_failed failed"
