# shellcheck shell=bash disable=SC2034 # (sourced: the tests use what it sets)
# tests/drop_in/lib.sh - shared by the drop-in tests (what a new user does:
# the wrapper, the options, the statistics, the install).  Each test sources
# it, makes checks with check/expect_* and ends with `finish`, which prints
# "N passed, N failed" for tests/drop_in/run.sh and fails if any check did.
# Needs BUILD (build/<ARCH>, built) and runs from the repository root.
set -u
: "${BUILD:?BUILD must name the build directory, e.g. build/x86_64}"
BUILD=$(cd "$BUILD" && pwd)
LIB=$BUILD/libpcmalloc.so
WRAPPER=$BUILD/pcmalloc
VERSION=$(sed -n 's/^#define PCMALLOC_VERSION "\(.*\)"$/\1/p' include/pcmalloc.h)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# pass NAME / fail NAME WHY...: record one check.
pass() {
    echo "ok   $1"
    passed=$((passed + 1))
}
fail() {
    local name=$1
    shift
    echo "FAIL $name: $*"
    failed=$((failed + 1))
}

# check NAME COMMAND...: passes when COMMAND succeeds.
check() {
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name" "'$*' failed"; fi
}

# contains FILE TEXT: the file has the fixed string TEXT (shown on failure).
contains() {
    grep -qF -- "$2" "$1" && return 0
    echo "  '$2' not in $1:" >&2
    head -20 "$1" | sed 's/^/    /' >&2
    return 1
}

# lacks FILE TEXT: the opposite.
lacks() {
    grep -qF -- "$2" "$1" || return 0
    echo "  '$2' found in $1:" >&2
    grep -F -- "$2" "$1" | head -5 | sed 's/^/    /' >&2
    return 1
}

# status_is EXPECTED COMMAND...: COMMAND exits with EXPECTED.
status_is() {
    local expected=$1 rc
    shift
    "$@"
    rc=$?
    [ "$rc" -eq "$expected" ] && return 0
    echo "  exit status $rc, expected $expected: $*" >&2
    return 1
}

# valid_json FILE: python3 parses it as one JSON document.
valid_json() {
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" && return 0
    echo "  not JSON: $1" >&2
    head -c 600 "$1" | sed 's/^/    /' >&2
    return 1
}

# served_by_pcmalloc FILE: a statistics table in FILE (stderr of a run)
# shows that pcmalloc served small objects (the "all" row's requests).
served_by_pcmalloc() {
    local requests
    requests=$(awk '$1 == "pcmalloc:" && $2 == "all" {print $3}' "$1" | tail -n 1)
    [ -n "$requests" ] && [ "$requests" -gt 0 ] && return 0
    echo "  no statistics showing pcmalloc served the program in $1:" >&2
    head -10 "$1" | sed 's/^/    /' >&2
    return 1
}

finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
