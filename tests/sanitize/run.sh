#!/usr/bin/env bash
# tests/sanitize/run.sh SUITE BINARY... - run harness binaries of a
# sanitizer build (mk/sanitize.mk) and record "<binary> <passed> <failed>"
# per binary in $RESULTS/SUITE.txt, as qemu/run-tests.sh does for the
# normal builds.  A binary under a preload/ folder runs with $PRELOAD_LIB
# preloaded (RUNNER must then start with env).  A sanitizer report ends the binary with a non-zero status
# (UBSan: -fno-sanitize-recover; TSan: exitcode 66 at exit, or at once with
# halt_on_error), which counts as a failure even when every check passed,
# so a report can never pass.  $RUNNER (words) is put before each binary:
# qemu-user for a cross build.  Exits non-zero if anything failed.
set -u
suite=$1
shift
results=${RESULTS:?RESULTS must name the results folder}
timeout_s=${PCM_TEST_TIMEOUT:-600}
mkdir -p "$results"
: >"$results/$suite.txt"
status=0
for binary in "$@"; do
    [ -x "$binary" ] || continue
    # shellcheck disable=SC2206 # RUNNER is words on purpose
    runner=(${RUNNER:-env})
    case "$binary" in
    */preload/*) runner+=("LD_PRELOAD=${PRELOAD_LIB:?PRELOAD_LIB must name the library}") ;;
    esac
    log=$(mktemp)
    echo "== [$suite] $binary"
    timeout "$timeout_s" "${runner[@]}" "$binary" >"$log" 2>&1
    rc=$?
    sed 's/^/  /' "$log"
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    passed=0
    failed=0
    if [ -n "$summary" ]; then
        passed=${summary%% passed*}
        failed=${summary#*passed, }
        failed=${failed%% failed*}
    fi
    if grep -qE 'runtime error:|WARNING: ThreadSanitizer|ERROR: [A-Za-z]*Sanitizer' "$log" && [ "$failed" -eq 0 ]; then
        echo "  !! $binary: a sanitizer report (above)"
        failed=1
    fi
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        echo "  !! $binary exited with status $rc$([ "$rc" -eq 124 ] && echo ' (timed out)')"
        failed=1
    fi
    [ "$failed" -eq 0 ] || status=1
    echo "$(basename "$binary") $passed $failed" >>"$results/$suite.txt"
    echo "   [$suite] $(basename "$binary"): $passed ok, $failed not ok"
    rm -f "$log"
done
exit $status
