#!/usr/bin/env bash
# tests/programs/cpython_tests.sh - a selection of CPython's own regression
# tests (Debian's libpython3.11-testsuite), run by Debian's python3.11 (not
# whatever python3 PATH finds first) without and then with pcmalloc
# preloaded: every test case must get the same verdict both times.
#
# PYTHONMALLOC=malloc in both runs: without it CPython serves every object
# of 512 bytes or less from its own pools and malloc sees little; with it,
# every object of every test goes through malloc.  Workers run in parallel
# (-j) and inherit LD_PRELOAD.  PCMALLOC_STATS=1 is given to the main
# process only, which drops it from its environment before the tests start:
# many tests run child processes and require their stderr to be empty.
. "$(dirname "$0")/lib.sh"
python=$(program python3.11) || no_program
host_python=/usr/bin/python3
verdicts=$(dirname "$0")/junit_verdicts.py

# The memory-heavy containers and codecs the issue names, then the
# threading, fork, gc and C-interface tests, leaving out the slow ones
# (concurrent_futures, io, signal, subprocess: minutes) and any that need
# the network.
tests=(
    test_dict test_list test_set test_unicode test_re test_json test_pickle
    test_threading test_queue test_gc
    test_deque test_collections test_ordered_dict test_userdict test_sort
    test_bytes test_long test_float test_struct test_functools test_heapq
    test_string test_copy test_bisect test_zlib test_marshal test_hashlib
    test_thread test_threading_local test_fork1 test_mmap test_memoryview
    test_xml_etree test_csv test_tracemalloc test_ctypes test_enum
    test_dataclasses test_tokenize test_fstring test_generators test_descr
    test_sys
)

if ! "$python" -c 'import test.test_dict' 2>/dev/null; then
    fail "cpython-regrtest: $python has no test package (Debian's libpython3.11-testsuite: scripts/deps.sh)"
    finish
    exit 1
fi

# regrtest SIDE [VAR=VALUE...]: the whole selection, its report in
# $work/SIDE.xml, its output in $work/SIDE.out, its status in SIDE_rc.
# Temporary files of the tests go under $work (TMPDIR, cwd).
regrtest() {
    local side=$1
    shift
    (cd "$work" && timeout 600 env TMPDIR="$work" PYTHONMALLOC=malloc "$@" "$python" -c '
import os
os.environ.pop("PCMALLOC_STATS", None)
from test.libregrtest import main
main()' -j4 --timeout 300 --junit-xml "$work/$side.xml" "${tests[@]}" >"$work/$side.out" 2>"$work/$side.err")
    eval "${side}_rc=$?"
    "$host_python" "$verdicts" "$work/$side.xml" >"$work/$side.verdicts" 2>>"$work/$side.err" ||
        echo "no JUnit report" >"$work/$side.verdicts"
}

regrtest plain
regrtest pcm LD_PRELOAD="$PCM_LIB" PCMALLOC_STATS=1
name="cpython-regrtest (${#tests[@]} modules, $(wc -l <"$work/plain.verdicts") test cases)"
ok=1
if [ "$plain_rc" -ne 0 ]; then
    echo "FAIL $name: exit status $plain_rc even without pcmalloc:"
    tail -n 15 "$work/plain.out"
    ok=0
fi
if [ "$plain_rc" -ne "$pcm_rc" ]; then
    echo "FAIL $name: exit status $plain_rc without pcmalloc, $pcm_rc with it:"
    tail -n 15 "$work/pcm.out"
    ok=0
fi
if ! cmp -s "$work/plain.verdicts" "$work/pcm.verdicts"; then
    echo "FAIL $name: verdicts differ (< without pcmalloc, > with it):"
    diff "$work/plain.verdicts" "$work/pcm.verdicts" | head -20
    # What the first few that failed with pcmalloc only said.
    "$host_python" "$verdicts" "$work/pcm.xml" $(diff "$work/plain.verdicts" "$work/pcm.verdicts" |
        sed -n 's/^> \(failure\|error\) //p' | head -n 3) | head -n 45
    ok=0
fi
check_served "$name" served "$work/pcm.err" "from the main process: it did not serve the program" || ok=0
conclude "$ok" "$name (same verdicts: $(cut -d' ' -f1 "$work/pcm.verdicts" | sort | uniq -c | xargs); main process's pcmalloc: $served)"
finish
