#!/usr/bin/env bash
# scripts/bench_deps.sh - install with apt-get what `make bench` needs and is
# missing: the peer allocators it compares pcmalloc with (glibc's malloc
# needs nothing), gnuplot for the plots, valgrind for the instruction
# counts, taskset for the pinned runs. Idempotent; quick when complete.
set -eu
packages=(
    libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0   # the peers, by LD_PRELOAD
    gnuplot-nox                                        # the PNG plots
    valgrind                                           # callgrind: instructions per malloc+free
    util-linux                                         # taskset
    gcc g++ libc6-dev python3                          # building and running the suite (g++: cxx_containers.cpp)
    perl sqlite3 clang                                 # the real programs (gcc and python3: above)
)
exec "$(dirname "$0")/deps.sh" "${packages[@]}"
