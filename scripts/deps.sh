#!/usr/bin/env bash
# scripts/deps.sh [PACKAGE...] - install with apt-get what building and
# testing pcmalloc need (or the packages named), and nothing that is already
# there (idempotent; quick when complete).
set -eu
default_packages=(
    make gcc libc6-dev binutils            # the host build
    g++                                    # C++ programs linked with libpcmalloc.a (tests/drop_in/static_link.sh)
    gcc-i686-linux-gnu libc6-dev-i386-cross binutils-i686-linux-gnu         # ARCH=x86
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu  # ARCH=arm64
    qemu-user                              # running the cross builds' tests
    coreutils findutils gawk               # the test runner (timeout, find, awk)
    python3 perl                           # real programs run under LD_PRELOAD
    pkgconf groff-base dash                # make test-drop-in: pkg-config, the man page, POSIX sh
    clang libclang-rt-14-dev               # make test-fuzz: libFuzzer and ASan/UBSan runtimes (mk/fuzz.mk)
    libpython3.11-testsuite sqlite3 git    # ... (tests/programs/: CPython's own tests,
    redis-server redis-tools               #      sqlite3, git, redis-server + redis-benchmark,
    postgresql nodejs                      #      a PostgreSQL server + pgbench, Node.js)
)
if [ $# -gt 0 ]; then
    packages=("$@")
else
    packages=("${default_packages[@]}")
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#packages[@]} packages present"
    exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
# A mirror in sync may fail one index (security, another architecture's):
# the install below says whether what it needs came down.
$sudo apt-get update -qq || echo "deps: apt-get update reported errors; installing anyway"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -o DPkg::Lock::Timeout=300 -y -qq --no-install-recommends "${missing[@]}"
