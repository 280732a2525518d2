#!/usr/bin/env bash
# sort(1) on a generated file of a few million lines.
. "$(dirname "$0")/lib.sh"
sort=$(program sort) || no_program
awk -v n="$(scaled 2000000)" 'BEGIN { srand(42); for (i = 0; i < n; i++) printf "%08x line %d\n", int(rand() * 4294967295), i }' \
    >"$work/lines.txt"
compare_run sort-2M-lines "$sort" -S 64M "$work/lines.txt"
finish
