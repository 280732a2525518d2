#!/usr/bin/env bash
# qemu/summarize.sh RESULTS [PREFIX] - add up the counts run-tests.sh wrote
# (only files starting with PREFIX, if given), print a table per suite and,
# last, the line "N passed, N failed".  Fails when anything failed or when
# nothing ran at all.
set -u
results=$1
prefix=${2:-}
total_passed=0
total_failed=0
shopt -s nullglob
files=("$results/$prefix"*.txt)
echo "== summary"
for f in "${files[@]}"; do
    suite=$(basename "$f" .txt)
    read -r p q < <(awk '{p += $2; q += $3} END {print p + 0, q + 0}' "$f")
    printf '   %-20s %5d passed %5d failed\n' "$suite" "$p" "$q"
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + q))
    awk '$3 > 0 {print "     failing: " $1}' "$f"
done
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ] && [ "$total_passed" -gt 0 ]
