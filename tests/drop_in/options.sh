#!/usr/bin/env bash
# tests/drop_in/options.sh - the PCMALLOC_* variables through the preload
# path, as a user sets them: each malformed value gives exactly one line on
# stderr naming the variable and the default, and the program runs on
# unharmed; PCMALLOC_VERBOSE=1 reports version, build, fast path, CPUs and
# the options in force; nothing is printed unasked; PCMALLOC_STATS=1 and
# json at exit, malloc_stats() and malloc_info() on demand in a program of
# ours; and the option tables of the README and pcmalloc(7) list every
# variable of src/options.c with its default.
# shellcheck source=tests/drop_in/lib.sh
. "$(dirname "$0")/lib.sh"

seq 5000 -1 1 | sed 's/$/ some text/' >"$work/input"
sort "$work/input" >"$work/sorted"

# run_sorted NAME VAR=VALUE...: sort under pcmalloc with these variables;
# its stdout must be right and its exit status 0.  stderr in $work/err.
run_sorted() {
    local name=$1
    shift
    env "$@" LD_PRELOAD="$LIB" sort "$work/input" >"$work/out" 2>"$work/err"
    local rc=$?
    if [ "$rc" -eq 0 ] && cmp -s "$work/out" "$work/sorted"; then
        return 0
    fi
    fail "$name" "sort with $* exited $rc or printed something else"
    return 1
}

# one_warning NAME VAR VALUE: one line, naming VAR and the default used.
one_warning() {
    local name=$1 var=$2 value=$3
    run_sorted "$name" "$var=$value" || return
    local lines
    lines=$(wc -l <"$work/err")
    if [ "$lines" -eq 1 ] && grep -q "^pcmalloc: $var=\".*\" .*; using the default [0-9]*$" "$work/err"; then
        pass "$name"
    else
        fail "$name" "$var='$value': expected one warning line, got $lines: $(head -c 300 "$work/err")"
    fi
}

one_warning cpus_not_a_number PCMALLOC_CPUS lots
one_warning cpus_out_of_range PCMALLOC_CPUS 99999
one_warning cpus_negative PCMALLOC_CPUS -1
one_warning cpus_huge PCMALLOC_CPUS 184467440737095516170
one_warning stats_word PCMALLOC_STATS yes
one_warning verbose_two PCMALLOC_VERBOSE 2
one_warning rseq_empty PCMALLOC_RSEQ ""
one_warning purge_delay_hex PCMALLOC_PURGE_DELAY 0x10
one_warning hardened_newline PCMALLOC_HARDENED "$(printf '1\n2')"

# a PCMALLOC_* variable that is no option: a typo, said once
if run_sorted typo PCMALLOC_STAT=1; then
    check typo_one_line test "$(cat "$work/err")" = \
        "pcmalloc: PCMALLOC_STAT is not a pcmalloc variable; ignored (the variables: man pcmalloc)"
fi

# nothing printed unasked
run_sorted quiet_by_default && check quiet_by_default test ! -s "$work/err"

# PCMALLOC_VERBOSE=1: five lines, and the options in force
if run_sorted verbose PCMALLOC_VERBOSE=1 PCMALLOC_CPUS=1; then
    check verbose_version_and_build grep -q "^pcmalloc: pcmalloc $VERSION, [a-z0-9_]* build (.* atomics)$" "$work/err"
    check verbose_fast_path grep -Eq "^pcmalloc: fast path: (rseq|cas) \(.+\)$" "$work/err"
    check verbose_cpus_and_heaps grep -Eq "^pcmalloc: [0-9]+ possible CPUs, 1 per-CPU heaps, CPU number from .+$" \
        "$work/err"
    check verbose_options_in_force contains "$work/err" \
        "pcmalloc: options: PCMALLOC_STATS=0 PCMALLOC_VERBOSE=1 PCMALLOC_RSEQ=1 PCMALLOC_CPUS=1 "
    check verbose_hardening grep -q "^pcmalloc: default build: .*libpcmalloc-hardened.so" "$work/err"
    check verbose_five_lines test "$(wc -l <"$work/err")" -eq 5
fi

# Where /sys/devices/system/cpu/possible cannot be read, the CPU count is
# a guess (the affinity mask) that need not bound every CPU number, and
# the rseq pop indexes the heaps by the CPU number unchecked: the CAS path
# then.  The file is hidden in a mount namespace of the test's own (as
# root; skipped where unshare or the bind mount is refused).
if run_sorted rseq_default PCMALLOC_VERBOSE=1 && grep -q "^pcmalloc: fast path: rseq " "$work/err"; then
    if unshare --mount sh -c 'mount --bind /dev/null /sys/devices/system/cpu/possible' 2>/dev/null; then
        unshare --mount sh -c 'mount --bind /dev/null /sys/devices/system/cpu/possible &&
            exec env PCMALLOC_VERBOSE=1 LD_PRELOAD="$1" sort "$2"' sh "$LIB" "$work/input" \
            >"$work/out" 2>"$work/err"
        check no_possible_cpus_sorted cmp -s "$work/out" "$work/sorted"
        check no_possible_cpus_cas_path contains "$work/err" \
            "pcmalloc: fast path: cas (/sys/devices/system/cpu/possible cannot be read"
    else
        echo "     (no_possible_cpus skipped: no mount namespace here)"
    fi
fi

# PCMALLOC_STATS=1: the table at exit, rows of the right width
if run_sorted stats_table PCMALLOC_STATS=1; then
    check stats_table_served served_by_pcmalloc "$work/err"
    check stats_table_heading grep -q "^pcmalloc: statistics of pcmalloc $VERSION: .* build (.* atomics), [0-9]* per-CPU heaps, CPU number from .*$" "$work/err"
    check stats_table_fast_path grep -Eq "^pcmalloc: fast path (rseq|cas) \(.+\), [0-9]+ restarted sections$" "$work/err"
    check stats_table_class_rows awk '
        /class bytes/ { inside = 1; next }
        inside && $2 == "all" { inside = 0; all = 1 }
        inside && NF != 7 { print "bad row: " $0; bad = 1 }
        inside { rows++ }
        END { exit !(all && rows > 0 && !bad) }' "$work/err"
fi

# PCMALLOC_STATS=json: one JSON object whose class and heap requests agree
if run_sorted stats_json PCMALLOC_STATS=json; then
    check stats_json_valid valid_json "$work/err"
    check stats_json_consistent python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
by_class = sum(c["requests"] for c in d["classes"])
by_heap = sum(h["requests"] for h in d["heaps"])
live = sum(c["live"] * c["size"] for c in d["classes"])
assert by_class > 0 and by_class == by_heap, (by_class, by_heap)
assert live == d["totals"]["small_live_bytes"], (live, d["totals"])
assert all(c["peak"] >= c["live"] for c in d["classes"])
assert d["totals"]["committed_peak_bytes"] <= d["totals"]["mapped_peak_bytes"]
' "$work/err"
fi

# malloc_stats() and malloc_info() in a program of ours, preloaded
cat >"$work/report.c" <<'C'
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    enum { N = 1000 };
    static char *p[N];
    for (int i = 0; i < N; i++)
        if (!(p[i] = malloc(300)) || !memset(p[i], 1, 300))
            return 1;
    malloc_stats();
    if (malloc_info(0, stdout) != 0)
        return 2;
    for (int i = 0; i < N; i++)
        free(p[i]);
    return 0;
}
C
if cc -O1 -o "$work/report" "$work/report.c"; then
    LD_PRELOAD="$LIB" "$work/report" >"$work/xml" 2>"$work/err"
    check report_program_exits_0 test $? -eq 0
    check malloc_stats_class_320 awk '$1 == "pcmalloc:" && $2 == 320 && $3 >= 1000 && $4 >= 1000 {ok = 1} END {exit !ok}' \
        "$work/err"
    check malloc_info_is_xml python3 -c '
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "malloc" and root.get("version") == "1"
assert root.findall("heap"), "no heap"
current = [int(s.get("size")) for s in root.findall("system") if s.get("type") == "current"]
assert current and current[0] >= 300000, current
' "$work/xml"
else
    fail report_program "cc could not build it"
fi

# PCMALLOC_PURGE_THREAD=1 through the preload path, fork handler included:
# python3 gets a thread named pcmalloc-purge, and the child of its fork,
# which inherits none, one of its own once it allocates past its caches.
cat >"$work/purge.py" <<'PY'
import glob, os, sys, time
def purge_threads():
    return sum(open(p).read().strip() == "pcmalloc-purge" for p in glob.glob("/proc/self/task/*/comm"))
def wait_for_one():
    for _ in range(200):
        if purge_threads() == 1:
            return True
        time.sleep(0.01)
    return False
kept = [bytearray(200000) for _ in range(20)]
if not wait_for_one():
    sys.exit(2)
pid = os.fork()
if pid == 0:
    kept = [bytearray(300000 - 1000 * i) for i in range(20)]
    os._exit(0 if wait_for_one() else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
PY
PCMALLOC_PURGE_THREAD=1 LD_PRELOAD="$LIB" /usr/bin/python3 "$work/purge.py" 2>"$work/err"
check purge_thread_in_python_and_its_fork test $? -eq 0
PCMALLOC_PURGE_THREAD=0 LD_PRELOAD="$LIB" /usr/bin/python3 -c '
import glob, sys
sys.exit(any(open(p).read().strip() == "pcmalloc-purge" for p in glob.glob("/proc/self/task/*/comm")))'
check no_purge_thread_by_default test $? -eq 0

# the README shows the verbose report as it is printed
PCMALLOC_VERBOSE=1 "$WRAPPER" true 2>"$work/err"
check readme_verbose_options_line contains README.md "$(grep '^pcmalloc: options: ' "$work/err")"

# the documentation lists every variable with its default
grep -o 'PCM_OPTION_[A-Z]*( *"PCMALLOC_[A-Z_]*", *[a-z_]*, *[A-Z_0-9]*' src/options.c |
    sed 's/.*"\(PCMALLOC_[A-Z_]*\)", *[a-z_]*, *\([A-Z_0-9]*\)/\1 \2/; s/PCM_STATS_OFF/0/; s/HARDENED_DEFAULT/0/' >"$work/options"
check options_found test "$(wc -l <"$work/options")" -ge 6
while read -r name default; do
    check "readme_lists_$name" grep -Eq "^\| \`$name\` \| .* \| \`$default\` \| .* \|$" README.md
    check "man_page_lists_$name" grep -Eq "^$name	.*" docs/pcmalloc.7.in
done <"$work/options"
finish
