#!/usr/bin/env bash
# tests/fuzz/run.sh FUZZER SECONDS SEED_DIR... - the fuzz suite of test-all
# (mk/fuzz.mk): replay every input of the SEED_DIRs once (the seed corpus
# and the saved regressions: each must pass), on the fast path start-up
# picks and with PCMALLOC_RSEQ=0, then fuzz for SECONDS from
# them in a scratch corpus (the repository's folders are never written).
# Records "fuzz_replay", "fuzz_replay_cas" and "fuzz_<SECONDS>s" lines in
# $RESULTS/fuzz.txt.
# A crash's input is kept in $RESULTS/fuzz-crashes/ and named in the log,
# with the command that replays it.  Exits non-zero if either part failed.
set -u
fuzzer=$1
seconds=$2
shift 2
results=${RESULTS:?RESULTS must name the results folder}
options=${FUZZ_OPTIONS:-}
mkdir -p "$results"
: >"$results/fuzz.txt"
status=0

record() { # NAME OK
    if [ "$2" = ok ]; then
        echo "$1 1 0" >>"$results/fuzz.txt"
        echo "   [fuzz] $1: ok"
    else
        echo "$1 0 1" >>"$results/fuzz.txt"
        echo "   [fuzz] $1: NOT OK"
        status=1
    fi
}

inputs=$(find "$@" -type f ! -name '*.md' 2>/dev/null | wc -l)
log=$(mktemp)
# Replayed on the fast path start-up picks and on the CAS one.
for path in default cas; do
    echo "== [fuzz] replay ($path fast path): $inputs inputs from $*"
    env=()
    [ "$path" = cas ] && env=(PCMALLOC_RSEQ=0)
    # Files, not folders: a folder argument would make libFuzzer fuzz, not replay.
    # shellcheck disable=SC2086
    find "$@" -type f ! -name '*.md' -print0 | xargs -0 -r env "${env[@]}" "$fuzzer" $options -runs=1 >"$log" 2>&1
    rc=$?
    tail -n 1 "$log" | sed 's/^/  /'
    name=fuzz_replay$([ "$path" = cas ] && echo _cas)
    if [ "$rc" -eq 0 ]; then
        record "$name" ok
    else
        grep -E 'api_fuzz: |Running: |ERROR|runtime error' "$log" | head -n 20 | sed 's/^/  /'
        record "$name" fail
    fi
done

echo "== [fuzz] $seconds s of fuzzing from the seeds"
scratch=$(mktemp -d)
crashes=$results/fuzz-crashes
rm -rf "$crashes" # only this run's crashes are named below
mkdir -p "$crashes"
# shellcheck disable=SC2086
"$fuzzer" $options -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$crashes/" \
    "$scratch" "$@" >"$log" 2>&1
rc=$?
grep -E '^#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$log" | sed 's/^/  /'
if [ "$rc" -eq 0 ]; then
    record "fuzz_${seconds}s" ok
else
    grep -E 'api_fuzz: |ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -n 20 | sed 's/^/  /'
    for crash in "$crashes"/*; do
        [ -f "$crash" ] && echo "  replay: PCM_FUZZ_TRACE=1 $fuzzer $crash" \
            "(then add it to tests/fuzz/regressions/ with the fix)"
    done
    record "fuzz_${seconds}s" fail
fi
rm -rf "$scratch" "$log"
exit $status
