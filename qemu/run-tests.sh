#!/usr/bin/env bash
# qemu/run-tests.sh ARCH BUILD - run one build's test binaries: natively for
# the host's own architecture (x86_64 twice: on the rseq fast path and with
# PCMALLOC_RSEQ=0 on the CAS one), under qemu-user for the cross builds (arm64
# twice: a CPU without LSE and one with it; x86 also as the freestanding K6
# program under a Pentium model, plus the cmov canary and the instruction
# audit), and on x86 and arm64 Debian's own perl, sort and python3 of that
# architecture with pcmalloc preloaded (scripts/foreign_programs.sh fetches
# them; tests/programs/ runs them).  Each suite's counts go to
# $RESULTS/<ARCH>-<suite>.txt as lines "<binary> <passed> <failed>";
# qemu/summarize.sh adds them up.
#
# qemu/run-tests.sh ARCH BUILD hardened - the hardened build (mk/hardened.mk):
# every binary once, on the CAS fast path it always runs (natively, or under
# qemu-user on the first CPU model), suites named hardened-*; the K6
# instruction audit on x86, no rseq audit (it has no rseq path) and, to stay
# within two minutes, only perl, sort and python3 of the real programs
# (x86_64).
set -u
arch=$1
build=$2
mode=${3:-}
results=${RESULTS:-$build/results}
mkdir -p "$results"
per_binary_timeout=${PCM_TEST_TIMEOUT:-900}

# seconds_since NANOSECONDS: the time since then, to a tenth of a second
# (each binary's line shows it, so a suite that grows slow shows where).
seconds_since() {
    local tenths=$((($(date +%s%N) - $1) / 100000000))
    echo "$((tenths / 10)).$((tenths % 10))"
}

# run_binary SUITE BINARY RUNNER...: run one harness binary, echo its output
# indented, and record its counts.  A binary that dies or prints no summary
# counts as one failure, so a crash can never pass.
run_binary() {
    local suite=$1 binary=$2
    shift 2
    local log rc summary passed failed started
    log=$(mktemp)
    echo "== [$suite] $binary"
    started=$(date +%s%N)
    timeout "$per_binary_timeout" "$@" "$binary" >"$log" 2>&1
    rc=$?
    sed 's/^/  /' "$log"
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -n "$summary" ]; then
        passed=${summary%% passed*}
        failed=${summary#*passed, }
        failed=${failed%% failed*}
    else
        passed=0
        failed=0
    fi
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        echo "  !! $binary exited with status $rc$( [ "$rc" -eq 124 ] && echo ' (timed out)')"
        failed=1
    fi
    echo "$(basename "$binary") $passed $failed" >>"$results/$arch-$suite.txt"
    echo "   [$suite] $(basename "$binary"): $passed ok, $failed not ok ($(seconds_since "$started") s)"
    rm -f "$log"
}

# record SUITE NAME OK: one non-harness check (audit, canary) as one test.
record() {
    if [ "$3" = ok ]; then
        echo "$2 1 0" >>"$results/$arch-$1.txt"
        echo "   [$1] $2: ok"
    else
        echo "$2 0 1" >>"$results/$arch-$1.txt"
        echo "   [$1] $2: NOT OK"
    fi
}

# run_suite SUITE RUNNER PRELOAD_RUNNER: every test binary under RUNNER,
# every preload program under PRELOAD_RUNNER (RUNNER with libpcmalloc.so
# preloaded into the program, not into qemu).  Word-split on purpose.
run_suite() {
    local suite=$1 runner=$2 preload_runner=$3 binary
    for binary in "$build"/tests/*; do
        [ -x "$binary" ] && run_binary "$suite" "$binary" $runner
    done
    for binary in "$build"/preload/*; do
        [ -x "$binary" ] && run_binary "$suite" "$binary" $preload_runner
    done
}

# run_foreign_programs SUITE DEBARCH TRIPLET SYSROOT RUNNER: the real
# programs of Debian's DEBARCH (perl, sort, python3.11, which
# scripts/foreign_programs.sh fetches and unpacks into build/foreign/), each
# without and with pcmalloc preloaded into the guest program, under RUNNER
# (qemu-user on the cross SYSROOT) with the unpacked root's libraries and
# modules.  Scaled by PROGRAM_SCALE (percent, 50 by default under qemu).
# Programs that could not be fetched count as failures.
foreign_programs_fetched=
run_foreign_programs() {
    local suite=$1 debarch=$2 triplet=$3 sysroot=$4 runner=$5 root name
    root=$(pwd)/build/foreign/$debarch/root
    if [ -z "$foreign_programs_fetched" ]; then
        echo "== [$suite] scripts/foreign_programs.sh $debarch"
        if scripts/foreign_programs.sh "$debarch" 2>&1 | sed 's/^/  /'; [ "${PIPESTATUS[0]}" -eq 0 ]; then
            foreign_programs_fetched=yes
        else
            foreign_programs_fetched=no
        fi
    fi
    if [ "$foreign_programs_fetched" != yes ]; then
        echo "  !! the $debarch programs could not be fetched (no network to Debian's mirrors?): not run"
        for name in python perl sort; do
            record "$suite" "$name.sh" fail
        done
        return
    fi
    runner="$runner -E LD_LIBRARY_PATH=$sysroot/lib:$root/lib/$triplet:$root/usr/lib/$triplet"
    runner="$runner -E PYTHONHOME=$root/usr -E PERL5LIB=$root/usr/lib/$triplet/perl-base"
    for name in python perl sort; do
        run_binary "$suite" "tests/programs/$name.sh" env PCM_LIB="$lib" PCM_RUN="$runner" \
            PCM_RUN_PRELOAD="$runner -E LD_PRELOAD=$lib" PCM_PROGRAM_ROOT="$root" \
            PROGRAM_SCALE="${PROGRAM_SCALE:-50}" bash
    done
}

lib=$(cd "$build" && pwd)/libpcmalloc.so
shopt -s nullglob

# audit_rseq ARCH: the rseq fast path holds no atomic read-modify-write.
audit_rseq() {
    echo "== [audit] rseq fast path of $lib"
    if tests/audit/rseq_fast_path.sh "${OBJDUMP:-objdump}" "$lib" "$1"; then
        record audit rseq_fast_path ok
    else
        record audit rseq_fast_path fail
    fi
}

abi_suite=abi
[ "$mode" = hardened ] && abi_suite=hardened-abi
echo "== [$abi_suite] exported symbols of $lib"
if tests/abi/exported_symbols.sh "${NM:-nm}" "$lib"; then
    record "$abi_suite" exported_symbols ok
else
    record "$abi_suite" exported_symbols fail
fi
echo "== [$abi_suite] imported symbols of $lib"
if tests/abi/imported_symbols.sh "${NM:-nm}" "$lib"; then
    record "$abi_suite" imported_symbols ok
else
    record "$abi_suite" imported_symbols fail
fi
echo "== [$abi_suite] unwind tables of $lib"
if tests/abi/unwind_tables.sh "${NM:-nm}" "${READELF:-readelf}" "$lib"; then
    record "$abi_suite" unwind_tables ok
else
    record "$abi_suite" unwind_tables fail
fi

if [ "$mode" = hardened ]; then
    expect="PCM_TEST_EXPECT_FAST_PATH=cas PCM_TEST_HARDENED=1"
    case "$arch" in
    x86_64 | generic) runner="env $expect" ;;
    x86) runner="env QEMU_LD_PREFIX=/usr/i686-linux-gnu $expect qemu-i386 -E LD_LIBRARY_PATH=/usr/i686-linux-gnu/lib" ;;
    arm64) runner="env QEMU_LD_PREFIX=/usr/aarch64-linux-gnu $expect qemu-aarch64 -cpu cortex-a57" ;;
    *)
        echo "run-tests.sh: unknown ARCH $arch" >&2
        exit 2
        ;;
    esac
    if [ "$arch" = x86_64 ] || [ "$arch" = generic ]; then
        run_suite hardened "$runner" "$runner LD_PRELOAD=$lib"
    else
        run_suite hardened "$runner" "$runner -E LD_PRELOAD=$lib"
    fi
    if [ "$arch" = x86 ]; then
        echo "== [hardened-audit] K6 instruction audit of the hardened build"
        objects=$(find "$build/obj" -name '*.o' | sort)
        if tests/audit/x86_instructions.sh "${OBJDUMP:-i686-linux-gnu-objdump}" "$build/libpcmalloc.so" $objects; then
            record hardened-audit k6_instruction_audit ok
        else
            record hardened-audit k6_instruction_audit fail
        fi
    fi
    if [ "$arch" = x86_64 ]; then
        for name in perl sort python cxx; do
            [ -f "tests/programs/$name.sh" ] && run_binary hardened-programs "tests/programs/$name.sh" \
                env PCM_LIB="$lib" bash
        done
    fi
    exit 0
fi

case "$arch" in
x86_64)
    # Every test on both fast paths: restartable sequences (this kernel and
    # glibc have them) and the CAS fallback, forced.
    run_suite rseq "env PCM_TEST_EXPECT_FAST_PATH=rseq" "env PCM_TEST_EXPECT_FAST_PATH=rseq LD_PRELOAD=$lib"
    run_suite cas "env PCMALLOC_RSEQ=0 PCM_TEST_EXPECT_FAST_PATH=cas" \
        "env PCMALLOC_RSEQ=0 PCM_TEST_EXPECT_FAST_PATH=cas LD_PRELOAD=$lib"
    audit_rseq x86_64
    # Real programs of the host (tests/programs/*.sh: CPython's tests, sqlite3,
    # git, redis, PostgreSQL, Node.js, gcc, perl, sort, python3) under LD_PRELOAD:
    # only where the build is the host's own architecture.
    for script in tests/programs/*.sh; do
        [ "$(basename "$script")" = lib.sh ] || run_binary programs "$script" env PCM_LIB="$lib" bash
    done
    ;;
generic)
    run_suite generic "env PCM_TEST_EXPECT_FAST_PATH=cas" "env PCM_TEST_EXPECT_FAST_PATH=cas LD_PRELOAD=$lib"
    ;;
x86)
    sysroot=/usr/i686-linux-gnu
    # The cross sysroot has no ld.so.cache, so without LD_LIBRARY_PATH its
    # loader reads the host's and takes /lib32's libc (libc6-i386), whose
    # build differs: threads and fork then hang in glibc.
    # qemu-user has no rseq: the CAS path must have been chosen.
    qemu="env QEMU_LD_PREFIX=$sysroot PCM_TEST_EXPECT_FAST_PATH=cas qemu-i386 -E LD_LIBRARY_PATH=$sysroot/lib"
    run_suite i386 "$qemu" "$qemu -E LD_PRELOAD=$lib"
    # Natively as well where the kernel runs 32-bit programs (x86_64's
    # IA32 emulation): the i386 restartable sequences on this machine's own
    # CPUs at full speed, where the whole-machine VM (make test-vm) runs
    # them emulated.  The cross sysroot's loader, with its libraries.
    loader="$sysroot/lib/ld-linux.so.2 --library-path $sysroot/lib"
    if $loader "$build/tests/unit_sizeclass" >/dev/null 2>&1; then
        native="env PCM_TEST_EXPECT_FAST_PATH=rseq $loader"
        run_suite i386-rseq "$native" "env PCM_TEST_EXPECT_FAST_PATH=rseq LD_PRELOAD=$lib $loader"
    else
        echo "== [i386-rseq] this kernel runs no 32-bit program: the native i386 suite is not run"
    fi
    # Debian's i386 libc uses cmov, so the K6-class run is libc-free.
    run_binary k6 "$build/k6/arch_freestanding" qemu-i386 -cpu pentium
    echo "== [k6] cmov canary under qemu-i386 -cpu pentium (must die with SIGILL)"
    qemu-i386 -cpu pentium "$build/k6/cmov_canary" >/dev/null 2>&1
    rc=$?
    echo "  exit status $rc (132 = killed by SIGILL)"
    record k6 cmov_canary_dies_with_sigill "$([ "$rc" -eq 132 ] && echo ok)"
    echo "== [audit] K6 instruction audit"
    objects=$(find "$build/obj" -name '*.o' | sort)
    if tests/audit/x86_instructions.sh "${OBJDUMP:-i686-linux-gnu-objdump}" \
        "$build/libpcmalloc.so" $objects "$build"/tests/* "$build"/k6/arch_freestanding; then
        record audit k6_instruction_audit ok
    else
        record audit k6_instruction_audit fail
    fi
    audit_rseq x86
    # Debian's i386 perl, sort and python3 (they need an i686, not a K6).
    run_foreign_programs programs i386 i386-linux-gnu "$sysroot" "$qemu"
    ;;
arm64)
    sysroot=/usr/aarch64-linux-gnu
    # stress_phase_trim's phase at 256 MiB, as the 32-bit builds run it:
    # 1 GiB written four times took 17 s under emulation on each CPU.
    for cpu in cortex-a57:llsc max:lse; do
        qemu="env QEMU_LD_PREFIX=$sysroot PCM_TEST_EXPECT_VARIANT=${cpu#*:} PCM_TEST_EXPECT_FAST_PATH=cas"
        qemu="$qemu PCM_TEST_PHASE_MIB=${PCM_TEST_PHASE_MIB:-256}"
        qemu="$qemu qemu-aarch64 -cpu ${cpu%:*}"
        run_suite "${cpu%:*}-${cpu#*:}" "$qemu" "$qemu -E LD_PRELOAD=$lib"
    done
    audit_rseq arm64
    # Debian's arm64 perl, sort and python3, on both CPUs (both atomics).
    for cpu in cortex-a57:llsc max:lse; do
        run_foreign_programs "programs-${cpu#*:}" arm64 aarch64-linux-gnu "$sysroot" \
            "env QEMU_LD_PREFIX=$sysroot qemu-aarch64 -cpu ${cpu%:*}"
    done
    ;;
*)
    echo "run-tests.sh: unknown ARCH $arch" >&2
    exit 2
    ;;
esac
exit 0
