#!/usr/bin/env bash
# tests/audit/rseq_fast_path.sh OBJDUMP LIBRARY ARCH - fail unless the rseq
# fast path is what it claims: pcm_malloc, pcm_free and C++'s operator
# new(size_t) (malloc's fast path inlined, src/malloc_fast.h), disassembled
# from the library, hold a restartable section (the store of the descriptor into
# the thread's rseq area) and not one atomic read-modify-write - no
# lock-prefixed or implicitly locked (xchg) instruction on x86, no
# exclusive pair and no LSE atomic on arm64.  The CAS fallback and the
# remote free are calls out of these functions, so the whole body is the
# small-object path on the owner's CPU plus the calls to the slow ones.
# On x86_64 the sections also touch memory through a base register alone,
# never base + index (arch/x86_64/arch_rseq.h, step 2, says why).
# ARCH: x86_64, x86 or arm64.  Exit status 0 pass, 1 fail, 2 usage.
set -u
if [ "$#" -ne 3 ]; then
    echo "usage: $0 OBJDUMP LIBRARY ARCH" >&2
    exit 2
fi
objdump=$1 library=$2 arch=$3
case "$arch" in
# (xchg is locked only with a memory operand; xchg %ax,%ax is a padding nop)
x86_64) new_symbol=_Znwm section_store='mov +%[a-z0-9]+,%fs:0x8\(' forbidden='(^|[[:space:]])(lock|cmpxchg[a-z0-9]*|xadd[a-z]*)([[:space:]]|$)|xchg[a-z]*[[:space:]].*\(' ;;
x86) new_symbol=_Znwj section_store='mov +%[a-z0-9]+,%gs:0x8\(' forbidden='(^|[[:space:]])(lock|cmpxchg[a-z0-9]*|xadd[a-z]*)([[:space:]]|$)|xchg[a-z]*[[:space:]].*\(' ;;
arm64) new_symbol=_Znwm section_store='tpidr_el0' forbidden='(^|[[:space:]])(ld[a]?xr[bh]?|st[l]?xr[bh]?|ld[a]?xp|st[l]?xp|cas[a-z]*|swp[a-z]*|ld(add|clr|eor|set|smax|smin|umax|umin)[a-z]*|st(add|clr|eor|set|smax|smin|umax|umin)[a-z]*)([[:space:]]|$)' ;;
*)
    echo "usage: ARCH is x86_64, x86 or arm64, not $arch" >&2
    exit 2
    ;;
esac
# The instructions from a descriptor's store to the next ret or jmp (the
# sections' bodies) that read or write memory as base + index (lea only
# computes an address).
sections_indexed() {
    STORE=$section_store awk '
        $0 ~ ENVIRON["STORE"] { on = 1; next }
        on && /^(ret|jmp)/ { on = 0 }
        on && !/^lea/ && /\(%[a-z0-9]+,%[a-z0-9]+/ { print }'
}
status=0
# A failure, with the instructions at fault under it.
fail_listing() {
    echo "audit: $1"
    printf '%s\n' "$2" | sed 's/^/audit:   /'
    status=1
}
for function in pcm_malloc pcm_free "$new_symbol"; do
    indexed=""
    # By address and size from the symbol table: the library also names
    # them malloc and free (aliases), and objdump labels the code with
    # either name.
    read -r start size < <("$objdump" -t "$library" | awk -v f="$function" '$NF == f {print $1, $(NF - 1); exit}')
    body=""
    if [ -n "${start:-}" ]; then
        body=$("$objdump" -d --no-show-raw-insn --start-address="0x$start" \
            --stop-address="$(printf '0x%x' $((0x$start + 0x$size)))" "$library" |
            awk '/^[0-9a-f]+ <.*>:$/ {on = 1; next} /^$/ {on = 0} on')
    fi
    instructions=$(printf '%s\n' "$body" | grep -c ':')
    offenders=$(printf '%s\n' "$body" | cut -f2- | grep -E "$forbidden")
    if [ "$instructions" -lt 10 ]; then
        echo "audit: $function: only $instructions instructions found in $library"
        status=1
    elif ! printf '%s\n' "$body" | grep -Eq "$section_store"; then
        echo "audit: $function: no restartable section (no match for '$section_store')"
        status=1
    elif [ -n "$offenders" ]; then
        fail_listing "$function: atomic read-modify-write on the fast path:" "$offenders"
    elif [ "$arch" = x86_64 ] && ! indexed=$(printf '%s\n' "$body" | cut -f2- | sections_indexed); then
        echo "audit: $function: the scan of its restartable sections failed"
        status=1
    elif [ -n "$indexed" ]; then
        # arch/x86_64/arch_rseq.h, step 2: a slot loaded and stored as
        # base + index waits on every store-to-load forward.
        fail_listing "$function: a base + index memory operand inside a restartable section:" "$indexed"
    else
        echo "audit: $function: $instructions instructions, a restartable section, no atomic read-modify-write"
    fi
done
exit "$status"
