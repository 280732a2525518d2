#!/usr/bin/env bash
# tests/drop_in/run.sh BUILD RESULTS - run the drop-in tests (every
# tests/drop_in/*.sh but lib.sh and this file) against the host build in
# BUILD; write RESULTS/drop-in.txt, one line "<test> <passed> <failed>" per
# script (qemu/summarize.sh adds them up).  A script that dies without its
# "N passed, N failed" line counts as one failure.  Fails if anything did.
set -u
build=$1
results=$2
mkdir -p "$results"
: >"$results/drop-in.txt"
status=0
for script in tests/drop_in/*.sh; do
    name=$(basename "$script" .sh)
    case $name in lib | run) continue ;; esac
    echo "== [drop-in] $script"
    log=$(mktemp)
    BUILD=$build timeout 300 bash "$script" >"$log" 2>&1
    rc=$?
    sed 's/^/  /' "$log"
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    passed=0
    failed=1
    if [ -n "$summary" ]; then
        passed=${summary%% passed*}
        failed=${summary#*passed, }
        failed=${failed%% failed*}
    fi
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        echo "  !! $script exited with status $rc"
        failed=1
    fi
    echo "$name $passed $failed" >>"$results/drop-in.txt"
    echo "   [drop-in] $name: $passed ok, $failed not ok"
    [ "$failed" -eq 0 ] || status=1
    rm -f "$log"
done
exit $status
