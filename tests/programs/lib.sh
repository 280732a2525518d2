# tests/programs/lib.sh - shared by the real-program tests: run a command
# without and with pcmalloc preloaded, compare what it printed, and check
# from pcmalloc's own statistics that it really served the program.
# Usage in a test: . "$(dirname "$0")/lib.sh"; compare_run NAME CMD...
# Needs PCM_LIB (the libpcmalloc.so under test).
set -u
: "${PCM_LIB:?PCM_LIB must name libpcmalloc.so}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

compare_run() {
    local name=$1
    shift
    "$@" >"$work/plain.out" 2>"$work/plain.err"
    local plain_rc=$?
    LD_PRELOAD=$PCM_LIB PCMALLOC_STATS=1 "$@" >"$work/pcm.out" 2>"$work/pcm.err"
    local pcm_rc=$?
    local ok=1
    if [ "$plain_rc" -ne "$pcm_rc" ]; then
        echo "FAIL $name: exit status $plain_rc without pcmalloc, $pcm_rc with it"
        ok=0
    fi
    if ! cmp -s "$work/plain.out" "$work/pcm.out"; then
        echo "FAIL $name: output differs with pcmalloc preloaded:"
        diff "$work/plain.out" "$work/pcm.out" | head -20
        ok=0
    fi
    # The report pcmalloc printed at exit: segments mapped and objects
    # served prove its malloc, not glibc's, did the work.
    local segments served
    segments=$(sed -n 's/^pcmalloc: stats: \([0-9]*\) segments.*/\1/p' "$work/pcm.err" | head -n 1)
    served=$(awk '/^pcmalloc: stats: +[0-9]+ +[0-9]+ +[0-9]+$/ {s += $4} END {print s + 0}' "$work/pcm.err")
    if [ -z "$segments" ] || [ "$segments" -lt 1 ] || [ "$served" -lt 1 ]; then
        echo "FAIL $name: no pcmalloc statistics in its stderr: it did not serve the program"
        grep -v '^pcmalloc: stats:' "$work/pcm.err" | head -10
        ok=0
    fi
    if [ "$ok" -eq 1 ]; then
        echo "ok   $name (same output, exit $pcm_rc; pcmalloc: $segments segments, $served objects served)"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

passed=0
failed=0
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
