#!/usr/bin/env bash
# tests/soak/run.sh LIB SOAK SECONDS RESULTS - the soak run (mk/soak.mk):
# the soak program (tests/soak/soak.c) for SECONDS with LIB preloaded and
# PCMALLOC_STATS=1, and with SOAK_PROGRAMS=1 the real programs
# (tests/programs/*.sh) over and over beside it until it ends.  Writes
# RESULTS/soak.txt ("<test> <passed> <failed>" lines, for
# qemu/summarize.sh); exits non-zero when anything failed.
set -u
lib=$(realpath "$1")
soak=$2
seconds=$3
results=$4
programs=${SOAK_PROGRAMS:-0}
mkdir -p "$results"
out=$results/soak.txt
: >"$out"
log=$(mktemp)
loop_pid=
cleanup() {
    # The program loop runs in its own process group: stop all of it.
    [ -z "$loop_pid" ] || kill -TERM -- "-$loop_pid" 2>/dev/null
    rm -f "$log" "$log.programs"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# The real programs in a loop, until the soak program is done (a file
# marks it).  Each script's own output says ok or FAIL.
if [ "$programs" = 1 ]; then
    set -m
    (
        round=0
        while [ ! -e "$log.done" ]; do
            round=$((round + 1))
            for script in "$(dirname "$0")"/../programs/*.sh; do
                [ "$(basename "$script")" = lib.sh ] && continue
                [ -e "$log.done" ] && break
                if timeout 900 env PCM_LIB="$lib" bash "$script" >"$log.one" 2>&1; then
                    echo "programs round $round $(basename "$script") 1 0"
                else
                    echo "programs round $round $(basename "$script") 0 1"
                    sed 's/^/    /' "$log.one" | head -60 >&2
                fi
            done
        done
        rm -f "$log.one"
    ) >"$log.programs" &
    loop_pid=$!
    set +m
fi

echo "== [soak] $soak $seconds s with $(basename "$lib") preloaded$([ "$programs" = 1 ] && echo ', the real programs in a loop beside it')"
# A minute more than asked for at most, then two for the programs' last round.
timeout $((seconds + 60)) env LD_PRELOAD="$lib" PCMALLOC_STATS=1 "$soak" "$seconds" >"$log" 2>&1
rc=$?
touch "$log.done"
grep -v '^pcmalloc: \( \+[0-9]\|(\)' "$log" | sed 's/^/  /'
if [ "$rc" -eq 0 ] && grep -q '^soak: done.*no error$' "$log" && grep -q '^pcmalloc: mapped .* segments' "$log"; then
    echo "soak 1 0" >>"$out"
    echo "   [soak] soak: ok"
else
    echo "soak 0 1" >>"$out"
    echo "   [soak] soak: NOT OK (exit status $rc$([ "$rc" -eq 124 ] && echo ', timed out'))"
fi
if [ -n "$loop_pid" ]; then
    # Let the round in progress finish its script (bounded by its timeout).
    timeout 180 tail --pid="$loop_pid" -f /dev/null
    kill -TERM -- "-$loop_pid" 2>/dev/null
    loop_pid=
    awk '{print $4 " " $5 " " $6}' "$log.programs" |
        awk '{p[$1] += $2; f[$1] += $3} END {for (s in p) print "programs_" s, p[s], f[s]}' | sort >>"$out"
    echo "   [soak] real programs beside it: $(awk '{p += $5; f += $6} END {print p + 0 " ok, " f + 0 " failed"}' "$log.programs")"
fi
rm -f "$log.done"
! awk '$3 > 0 {bad = 1} END {exit !bad}' "$out"
