#!/usr/bin/env bash
# scripts/bench_compare.sh - the benchmarks before and after a change, in one
# interleaved run: builds libpcmalloc.so of an older commit in a temporary git
# worktree, keeps the library and removes the worktree, then runs bench/run.py
# with the current build as "pcmalloc" and the old one as variant
# "pcmalloc-before" (variants the caller gives in BENCH_VARIANTS come after).
#
#   scripts/bench_compare.sh COMMIT CURRENT_LIBRARY OUT_DIR
#
# make bench-compare BEFORE=<commit> runs it (mk/bench_compare.mk), with MAKE
# and ARCH in the environment. The old library is kept as
# OUT_DIR/before-<sha>/libpcmalloc.so and reused by later comparisons with the
# same commit (delete it to rebuild); libpcmalloc.so.version beside it names
# the commit in the report.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 COMMIT CURRENT_LIBRARY OUT_DIR" >&2
    exit 2
fi
before=$1 current=$2 out=$3
: "${ARCH:?ARCH must be set (make bench-compare sets it)}"

if ! sha=$(git rev-parse --verify --quiet "$before^{commit}"); then
    echo "bench-compare: '$before' is not a commit of this repository" >&2
    exit 2
fi
short=$(git rev-parse --short "$sha")
library="$out/before-$short/libpcmalloc.so"
simulation="$out/before-$short/rseq-simulation/libpcmalloc.so"
tree="build/before-$short"

remove_tree() {
    # An interrupted run may have left the worktree, registered or not.
    git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    git worktree prune
}

# The old commit's library, built in a worktree of its own so that this
# checkout (and its uncommitted changes) stays as it is.
build_before() {
    remove_tree
    git worktree add --detach "$tree" "$sha"
    trap remove_tree EXIT
    "${MAKE:-make}" -C "$tree" lib ARCH="$ARCH"
    mkdir -p "$(dirname "$library")"
    # Its rseq-simulation build too, where that commit has one: its
    # callgrind count is then its rseq path's, like pcmalloc's.
    if "${MAKE:-make}" -C "$tree" -n rseq-simulation-lib >/dev/null 2>&1; then
        "${MAKE:-make}" -C "$tree" rseq-simulation-lib
        mkdir -p "$(dirname "$simulation")"
        cp "$tree/build/rseq-simulation/libpcmalloc.so" "$simulation"
    fi
    cp "$tree/build/$ARCH/libpcmalloc.so" "$library.tmp"
    mv "$library.tmp" "$library"
    git log -1 --format='commit %h (%s)' "$sha" > "$library.version"
    remove_tree
    trap - EXIT
}

if [ -f "$library" ]; then
    echo "bench-compare: reusing $library (built from $short; delete it to rebuild)"
else
    build_before
fi

variants="pcmalloc-before=$library${BENCH_VARIANTS:+,$BENCH_VARIANTS}"
echo "bench-compare: pcmalloc = $current, BENCH_VARIANTS=$variants"
if [ -f "$simulation" ]; then
    export BENCH_CALLGRIND_LIBRARIES="pcmalloc-before=$simulation${BENCH_CALLGRIND_LIBRARIES:+,$BENCH_CALLGRIND_LIBRARIES}"
fi
BENCH_VARIANTS=$variants exec python3 bench/run.py "$current" "$out"
