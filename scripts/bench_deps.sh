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
    gcc libc6-dev python3                              # building and running the suite
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "bench deps: all ${#packages[@]} packages present"
    exit 0
fi
echo "bench deps: installing ${missing[*]}"
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
