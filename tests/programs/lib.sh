# tests/programs/lib.sh - shared by the real-program tests: run a command
# without and with pcmalloc preloaded, compare what it printed, and check
# from pcmalloc's own statistics that it really served the program.
# Usage in a test: . "$(dirname "$0")/lib.sh"; compare_run NAME CMD...
# Needs PCM_LIB (the libpcmalloc.so under test).  For a foreign
# architecture's programs under qemu-user (qemu/run-tests.sh sets these):
#   PCM_RUN          the command line the program runs under (word-split;
#                    empty: natively)
#   PCM_RUN_PRELOAD  the one that runs it with pcmalloc preloaded into the
#                    program, not into qemu (default: env LD_PRELOAD=PCM_LIB)
#   PCM_PROGRAM_ROOT where the foreign programs were unpacked (default: the
#                    host's own, in /usr/bin and /bin)
#   PROGRAM_SCALE    percent of the full workload (default 100)
set -u
: "${PCM_LIB:?PCM_LIB must name libpcmalloc.so}"
# Absolute: tests run programs in other directories, whose children
# inherit LD_PRELOAD.
case $PCM_LIB in
/*) ;;
*) PCM_LIB=$PWD/$PCM_LIB ;;
esac
PCM_RUN=${PCM_RUN:-}
PCM_RUN_PRELOAD=${PCM_RUN_PRELOAD:-env LD_PRELOAD=$PCM_LIB}
PCM_PROGRAM_ROOT=${PCM_PROGRAM_ROOT:-}
PROGRAM_SCALE=${PROGRAM_SCALE:-100}
work=$(mktemp -d)
# at_exit COMMAND: run COMMAND (eval'd) when the test ends, however it ends
# (a server to stop); then the work directory goes.  A signal (timeout's
# TERM) ends the test through the same path.
cleanups=()
at_exit() {
    cleanups+=("$1")
}
run_cleanups() {
    local c
    for c in "${cleanups[@]}"; do
        eval "$c"
    done
    rm -rf "$work"
}
trap run_cleanups EXIT
trap 'exit 143' TERM INT HUP

compare_run() {
    local name=$1
    shift
    [ "$PROGRAM_SCALE" -eq 100 ] || name="$name (at $PROGRAM_SCALE%)"
    $PCM_RUN "$@" >"$work/plain.out" 2>"$work/plain.err"
    local plain_rc=$?
    PCMALLOC_STATS=1 $PCM_RUN_PRELOAD "$@" >"$work/pcm.out" 2>"$work/pcm.err"
    local pcm_rc=$?
    local ok=1
    if [ "$plain_rc" -ne "$pcm_rc" ]; then
        echo "FAIL $name: exit status $plain_rc without pcmalloc, $pcm_rc with it"
        ok=0
    fi
    same_sessions "$name" || ok=0
    if [ "$plain_rc" -ne 0 ]; then
        echo "FAIL $name: exit status $plain_rc even without pcmalloc:"
        head -10 "$work/plain.err"
        ok=0
    fi
    local served
    check_served "$name" served "$work/pcm.err" "in its stderr: it did not serve the program" || ok=0
    conclude "$ok" "$name (same output, exit $pcm_rc; pcmalloc: $served)"
}

# same_sessions NAME: what a run without pcmalloc and one with it printed
# ($work/plain.out, $work/pcm.out) is the same; otherwise says how they
# differ, naming test NAME, and returns 1.
same_sessions() {
    cmp -s "$work/plain.out" "$work/pcm.out" && return 0
    echo "FAIL $1: the sessions differ (< without pcmalloc, > with it):"
    diff "$work/plain.out" "$work/pcm.out" | head -30
    return 1
}

# conclude OK MESSAGE: the test's verdict once its checks are made: passed
# with MESSAGE where OK is 1 (each failed check said why), else one failure.
conclude() {
    if [ "$1" -eq 1 ]; then
        pass "$2"
    else
        failed=$((failed + 1))
    fi
}

# pcm_served FILE: from the statistics pcmalloc prints at exit
# (PCMALLOC_STATS=1) into FILE, "N segments, M objects served", summed over
# every process that wrote there; status 1 when there are none.  Segments
# mapped (in heaps, pooled or unmapped since) and objects served prove that its malloc, not
# glibc's, did the work.
pcm_served() {
    # (the table of src/stats_text.c: "mapped ... N segments, ..." and the
    # requests column of the size classes' "all" row, once per process)
    awk '$1 == "pcmalloc:" && $2 == "mapped" {
             for (i = 3; i <= NF; i++) if ($i ~ /^(segments|pooled|unmapped)/) segments += $(i - 1)
             reports++
         }
         $1 == "pcmalloc:" && $2 == "all" { served += $3 }
         END {
             if (reports == 0 || segments < 1 || served < 1) exit 1
             printf "%d segments, %d objects served%s\n", segments, served,
                 (reports > 1) ? " in " reports " processes" : ""
         }' "$1"
}

# check_served NAME VAR FILE WHERE: sets VAR to pcm_served FILE; where FILE
# holds no statistics, says so for test NAME ("no pcmalloc statistics
# WHERE"), shows FILE's last lines and returns 1.
check_served() {
    local summary
    if summary=$(pcm_served "$3"); then
        printf -v "$2" '%s' "$summary"
        return 0
    fi
    echo "FAIL $1: no pcmalloc statistics $4"
    tail -n 10 "$3"
    return 1
}

# pass MESSAGE / fail MESSAGE: one test's verdict, printed and counted.
pass() {
    echo "ok   $*"
    passed=$((passed + 1))
}
fail() {
    echo "FAIL $*"
    failed=$((failed + 1))
}

# program NAME...: the path of the first program NAME found in usr/bin or
# bin of PCM_PROGRAM_ROOT, or of / when it is not set (the system's own
# programs, as packaged, not whatever PATH finds first).  None found is one
# failure: the test then calls no_program, which ends it.
program() {
    local name path
    for name in "$@"; do
        for path in "$PCM_PROGRAM_ROOT/usr/bin/$name" "$PCM_PROGRAM_ROOT/bin/$name"; do
            [ -x "$path" ] && echo "$path" && return 0
        done
    done
    echo "FAIL no program $* in $PCM_PROGRAM_ROOT/usr/bin or $PCM_PROGRAM_ROOT/bin" >&2
    return 1
}

no_program() {
    failed=$((failed + 1))
    finish
    exit 1
}

# scaled N: N scaled by PROGRAM_SCALE percent, at least 1.
scaled() {
    local n=$(($1 * PROGRAM_SCALE / 100))
    echo $((n > 0 ? n : 1))
}

passed=0
failed=0
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
