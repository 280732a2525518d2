#!/usr/bin/env bash
# tests/audit/x86_instructions.sh OBJDUMP FILE... - fail if any 32-bit x86
# object or executable holds an instruction an AMD K6 (i586 + MMX) lacks.
#
# The i586 build must run on a K6, but nothing stops a compiler flag, a
# library compiled for i686 or a stray asm from slipping in a P6 or SSE
# instruction, and the emulator used for the K6 tests does not trap them
# all (QEMU's Pentium model executes multi-byte nops, for one).  So every
# file is disassembled (OBJDUMP -d, the i686 objdump) and each instruction's
# mnemonic and operands are checked against the patterns printed below.
#
# Output: lines beginning "audit:" - the patterns, per file the number of
# instructions scanned and of forbidden ones, each offender as
# "FILE ADDRESS <symbol>: instruction" (the first 40 per file), and a
# verdict.  Exit status: 0 none found, 1 forbidden instructions found or a
# file that is not a 32-bit x86 object objdump can disassemble, 2 usage.
# A 32-bit x86 object with no code (only data tables) passes with 0 scanned.  POSIX tools (awk, sed)
# besides objdump.
set -u

if [ "$#" -lt 2 ]; then
    echo "usage: $0 OBJDUMP FILE..." >&2
    exit 2
fi
objdump=$1
shift

# Mnemonics (after prefixes such as lock/rep/data16/cs are stripped), as
# anchored extended regular expressions, with why a K6 lacks each.
forbidden_mnemonics='^(cmov[a-z]*|fcmov[a-z]*|fu?comip?)$'   # P6 (CPUID CMOV)
forbidden_mnemonics=$forbidden_mnemonics'|^(mfence|lfence|sfence)$'     # SSE/SSE2 fences
forbidden_mnemonics=$forbidden_mnemonics'|^(cmpxchg16b|rdtscp|rdpid|rdrand|rdseed)$'
forbidden_mnemonics=$forbidden_mnemonics'|^(endbr32|endbr64)$'         # CET: 0f 1e is #UD on a K6
forbidden_mnemonics=$forbidden_mnemonics'|^(ldmxcsr|stmxcsr|prefetchnta|prefetcht[012]|movnti|maskmovq|movntq)$'
forbidden_mnemonics=$forbidden_mnemonics'|^(clflush|clflushopt|clwb|fxsave|fxrstor|xsave[a-z]*|xrstor[a-z]*|xgetbv)$'
forbidden_mnemonics=$forbidden_mnemonics'|^(pshufw|pavgb|pavgw|pextrw|pinsrw|pmaxsw|pmaxub|pminsw|pminub|pmovmskb|pmulhuw|psadbw|paddq|psubq|pmuludq)$' # SSE on MMX registers
forbidden_mnemonics=$forbidden_mnemonics'|^(fisttp[a-z]*|monitor|mwait|vzeroupper|vzeroall)$'
forbidden_mnemonics=$forbidden_mnemonics'|^(popcnt|lzcnt|movbe|crc32[a-z]*|andn|bextr|blsi|blsmsk|blsr|bzhi|pdep|pext|rorx|sarx|shlx|shrx|mulx|adcx|adox)$'
forbidden_mnemonics=$forbidden_mnemonics'|^(xbegin|xend|xabort|xtest)$'
# Operands naming an SSE/AVX register (or an AVX-512 mask register).
forbidden_operands='%([xyz]mm[0-9]|k[0-7])'
# `nop` with an operand is the multi-byte nop (0f 1f), a P6 addition.

echo "audit: K6 instruction audit, $# file(s), disassembled with $objdump -d"
echo "audit: forbidden: cmov*, fcmov*, fcomi/fcomip/fucomi/fucomip (P6);"
echo "audit:   mfence, lfence, sfence; cmpxchg16b, rdtscp, rdpid, rdrand, rdseed;"
echo "audit:   multi-byte nop (nop/nopw/nopl with an operand), endbr32/endbr64;"
echo "audit:   any %xmm/%ymm/%zmm/%k register operand (SSE, AVX);"
echo "audit:   SSE without such operands: ldmxcsr stmxcsr prefetchnta/t0/t1/t2 movnti"
echo "audit:   maskmovq movntq clflush* clwb fxsave fxrstor xsave* xrstor* xgetbv fisttp"
echo "audit:   monitor mwait vzeroupper vzeroall and the SSE integer ops on MMX registers;"
echo "audit:   popcnt lzcnt movbe crc32 BMI1/BMI2 adcx adox; TSX xbegin/xend/xabort/xtest"
echo "audit:   (MMX, 3DNow!, cpuid, rdtsc, cmpxchg8b, pause, ud2, sysenter are allowed)"

status=0
files_bad=0
total_scanned=0
total_forbidden=0
for file in "$@"; do
    if [ ! -f "$file" ] || [ ! -r "$file" ]; then
        echo "audit: $file: FAIL: not a readable file"
        status=1
        files_bad=$((files_bad + 1))
        continue
    fi
    listing=$(mktemp) || exit 2
    if ! "$objdump" -d --no-show-raw-insn -w "$file" >"$listing" 2>"$listing.err"; then
        echo "audit: $file: FAIL: $objdump cannot disassemble it: $(head -n 1 "$listing.err")"
        rm -f "$listing" "$listing.err"
        status=1
        files_bad=$((files_bad + 1))
        continue
    fi
    rm -f "$listing.err"
    format=$(sed -n 's/^.*file format //p' "$listing" | head -n 1)
    case $format in
    *i386*) ;;
    *)
        echo "audit: $file: FAIL: not a 32-bit x86 file (objdump says: ${format:-no format})"
        rm -f "$listing"
        status=1
        files_bad=$((files_bad + 1))
        continue
        ;;
    esac
    # Instruction lines are "  <hex address>:<TAB><mnemonic> <operands>";
    # symbol lines "<hex> <name>:" name the function for the report.
    result=$(awk -v file="$file" -v mn="$forbidden_mnemonics" -v op="$forbidden_operands" '
        BEGIN { FS = "\t"; scanned = 0; bad = 0; sym = "?" }
        /^[0-9a-f]+ <.*>:$/ {
            sym = $0
            sub(/^[0-9a-f]+ /, "", sym)
            sub(/:$/, "", sym)
            next
        }
        /^ *[0-9a-f]+:\t/ {
            addr = $1
            sub(/^ */, "", addr)
            sub(/:$/, "", addr)
            insn = $2
            for (i = 3; i <= NF; i++)
                insn = insn " " $i
            sub(/^ +/, "", insn)
            sub(/ *#.*$/, "", insn)    # objdump annotations
            sub(/ *<[^>]*>$/, "", insn) # branch target symbols
            if (insn == "" || insn == "...")
                next
            scanned++
            n = split(insn, w, /[ ]+/)
            k = 1
            while (k < n && w[k] ~ /^(lock|rep|repz|repe|repnz|repne|data16|data32|addr16|addr32|addr32|cs|ds|es|fs|gs|ss|notrack|bnd|xacquire|xrelease|rex(\.[wrxb]+)?)$/)
                k++
            mnemonic = w[k]
            operands = ""
            for (j = k + 1; j <= n; j++)
                operands = operands (operands == "" ? "" : " ") w[j]
            hit = 0
            if (mnemonic ~ mn)
                hit = 1
            else if (operands ~ op)
                hit = 1
            else if (mnemonic ~ /^nop[wl]?$/ && operands != "")
                hit = 1
            if (hit) {
                bad++
                if (bad <= 40)
                    printf "audit:   %s 0x%s %s: %s\n", file, addr, sym, insn
            }
        }
        END {
            if (bad > 40)
                printf "audit:   %s: ... and %d more\n", file, bad - 40
            printf "COUNTS %d %d\n", scanned, bad
        }' "$listing")
    rm -f "$listing"
    counts=$(printf '%s\n' "$result" | sed -n 's/^COUNTS //p')
    scanned=${counts%% *}
    bad=${counts##* }
    if [ -z "$counts" ]; then
        echo "audit: $file: FAIL: the disassembly could not be scanned"
        status=1
        files_bad=$((files_bad + 1))
        continue
    fi
    total_scanned=$((total_scanned + scanned))
    total_forbidden=$((total_forbidden + bad))
    if [ "$bad" -ne 0 ]; then
        echo "audit: $file: FAIL: $scanned instructions scanned, $bad forbidden:"
        printf '%s\n' "$result" | sed '/^COUNTS /d'
        status=1
        files_bad=$((files_bad + 1))
    else
        if [ "$scanned" -eq 0 ]; then
            echo "audit: $file: ok: 0 instructions scanned (no code: data only)"
        else
            echo "audit: $file: ok: $scanned instructions scanned, 0 forbidden"
        fi
    fi
done

if [ "$status" -eq 0 ]; then
    echo "audit: PASS: $# file(s), $total_scanned instructions, none a K6 lacks"
else
    echo "audit: FAIL: $files_bad of $# file(s) failed; $total_forbidden forbidden instruction(s) in $total_scanned scanned"
fi
exit "$status"
