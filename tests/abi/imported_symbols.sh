#!/usr/bin/env bash
# tests/abi/imported_symbols.sh NM LIB - libpcmalloc.so takes from other
# libraries only the names in imported_symbols.txt (the reasons are at its
# top).  A subset, not the whole list: builds differ a little (the hardened
# one compares with memcmp and pins no thread).
set -u
nm_tool=$1
lib=$2
allowed=$(grep -v '^#' "$(dirname "$0")/imported_symbols.txt" | LC_ALL=C sort -u)
actual=$("$nm_tool" -D --undefined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | LC_ALL=C sort -u)
extra=$(comm -13 <(echo "$allowed") <(echo "$actual"))
echo "imported: $(echo "$actual" | wc -l) symbols, $(echo "$allowed" | wc -l) allowed"
[ -z "$extra" ] || echo "imported but not allowed (tests/abi/imported_symbols.txt): $extra"
[ -z "$extra" ]
