#!/usr/bin/env bash
# tests/abi/exported_symbols.sh NM LIB - libpcmalloc.so must export exactly
# the names in exported_symbols.txt: the malloc family (also under glibc's
# __libc_* names, and cfree), C++'s operators new and delete and the pcm_*
# API, nothing internal (everything else is built with -fvisibility=hidden).
# @SIZE_T@ in a C++ name is size_t's code in the mangling: m on a 64-bit
# target, j on a 32-bit one.
set -u
nm_tool=$1
lib=$2
# The ELF header's class byte: 1 for 32-bit, 2 for 64-bit.
case $(od -An -tu1 -j4 -N1 "$lib" | tr -d ' ') in
1) size_t_code=j ;;
*) size_t_code=m ;;
esac
expected=$(sed "s/@SIZE_T@/$size_t_code/" "$(dirname "$0")/exported_symbols.txt" | LC_ALL=C sort -u)
actual=$("$nm_tool" -D --defined-only "$lib" | awk '$2 ~ /^[TWDBiV]$/ {print $3}' | LC_ALL=C sort -u)
missing=$(comm -23 <(echo "$expected") <(echo "$actual"))
extra=$(comm -13 <(echo "$expected") <(echo "$actual"))
echo "exported: $(echo "$actual" | wc -l) symbols, expected $(echo "$expected" | wc -l)"
[ -z "$missing" ] || echo "missing: $missing"
[ -z "$extra" ] || echo "not meant to be exported: $extra"
[ -z "$missing" ] && [ -z "$extra" ]
