#!/usr/bin/env bash
# tests/abi/unwind_tables.sh NM READELF LIB - libpcmalloc.so carries unwind
# tables only where an exception may pass: operator new's frames (a new
# handler or the C++ runtime may throw through them).  The rest are left out
# (Makefile): the kernel maps the library's read-only pages whole, so every
# byte of .eh_frame is resident in every process.
set -u
nm_tool=$1
readelf_tool=$2
lib=$3
limit=4096
hex=$("$readelf_tool" -SW "$lib" | sed -n 's/.* \.eh_frame  *[A-Z]*  *[0-9a-f]*  *[0-9a-f]*  *\([0-9a-f]*\) .*/\1/p')
size=$((16#${hex:-0}))
new=$("$nm_tool" "$lib" | awk '$3 == "_Znwm" || $3 == "_Znwj" {print $1; exit}')
covered=no
if [ -n "$new" ]; then
    # An FDE line: "... FDE cie=... pc=START..END"
    at=$((16#$new))
    while read -r lo hi; do
        if [ "$at" -ge $((16#$lo)) ] && [ "$at" -lt $((16#$hi)) ]; then
            covered=yes
        fi
    done < <("$readelf_tool" --debug-dump=frames "$lib" 2>/dev/null | sed -n 's/.* FDE .*pc=\([0-9a-f]*\)\.\.\([0-9a-f]*\).*/\1 \2/p')
fi
echo ".eh_frame: $size bytes (at most $limit); operator new (${new:-missing}) unwinds: $covered"
[ "$size" -le "$limit" ] && [ "$covered" = yes ]
