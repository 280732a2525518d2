#!/usr/bin/env bash
# tests/abi/exported_symbols.sh NM LIB - libpcmalloc.so must export exactly
# the names in exported_symbols.txt: the malloc family and the pcm_* API,
# nothing internal (everything else is built with -fvisibility=hidden).
set -u
nm_tool=$1
lib=$2
expected=$(dirname "$0")/exported_symbols.txt
actual=$("$nm_tool" -D --defined-only "$lib" | awk '$2 ~ /^[TWDBiV]$/ {print $3}' | sort -u)
missing=$(comm -23 "$expected" <(echo "$actual"))
extra=$(comm -13 "$expected" <(echo "$actual"))
echo "exported: $(echo "$actual" | wc -l) symbols, expected $(wc -l <"$expected")"
[ -z "$missing" ] || echo "missing: $missing"
[ -z "$extra" ] || echo "not meant to be exported: $extra"
[ -z "$missing" ] && [ -z "$extra" ]
