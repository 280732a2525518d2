#!/usr/bin/env bash
# tests/fuzz/run.sh FUZZER SECONDS SEED_DIR... - the fuzz suite of test-all
# (mk/fuzz.mk): replay every input of the SEED_DIRs once (the seed corpus
# and the saved regressions: each must pass), on the fast path start-up
# picks and with PCMALLOC_RSEQ=0, then fuzz for SECONDS from
# them in scratch corpora, one fuzzer per CPU (up to 4; the repository's
# folders are never written).
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

# One fuzzer per CPU (the others would sit idle), each from its own seed
# into its own scratch corpus.
jobs=$(nproc 2>/dev/null || echo 1)
[ "$jobs" -gt 4 ] && jobs=4
echo "== [fuzz] $seconds s of fuzzing from the seeds, $jobs fuzzers"
scratch=$(mktemp -d)
crashes=$results/fuzz-crashes
rm -rf "$crashes" # only this run's crashes are named below
mkdir -p "$crashes"
pids=()
for job in $(seq 1 "$jobs"); do
    mkdir -p "$scratch/$job"
    seed=$(( (RANDOM << 15 | RANDOM) + job ))
    # shellcheck disable=SC2086
    "$fuzzer" $options -seed="$seed" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$crashes/" "$scratch/$job" "$@" >"$log.$job" 2>&1 &
    pids+=($!)
done
rc=0
for job in $(seq 1 "$jobs"); do
    wait "${pids[job - 1]}" || rc=1
    echo "  fuzzer $job ($(grep -m1 -o 'Seed: [0-9]*' "$log.$job")):"
    grep -E '^#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$log.$job" | sed 's/^/    /'
done
cat "$log".* >"$log"
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
rm -rf "$scratch" "$log" "$log".*
exit $status
