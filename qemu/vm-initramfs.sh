#!/usr/bin/env bash
# qemu/vm-initramfs.sh BUILD SYSROOT BUSYBOX OUT - the initramfs (a gzip'ed
# newc cpio) of a whole-machine QEMU run: the guest's whole file system.
#
#   /init, /pcm/vm-suite.sh   qemu/vm-init.sh and qemu/vm-suite.sh
#   /bin/busybox + links      Debian's static busybox of the guest's arch
#   /lib/                     the dynamic loader and every shared library
#                             of the cross SYSROOT (/usr/<triplet>/lib):
#                             the test binaries are linked against it, the
#                             same C library qemu-user runs them with, and
#                             tests dlopen some (libstdc++, libm, libgcc_s)
#   /pcm/tests/, /pcm/preload/, /pcm/libpcmalloc.so(.1)
#                             BUILD's test binaries and library, in the same
#                             places relative to each other as in BUILD
#                             (abi_shared_link finds the library by
#                             $ORIGIN/..)
#
# The tree is staged in OUT's folder (root/) and packed with owner root;
# nothing needs root on the host.  Rebuilt on every run: it is seconds,
# and a stale binary in it would test the wrong build.
set -eu
build=$1
sysroot=$2
busybox=$3
out=$4
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$out")/root

rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib,pcm/tests,pcm/preload}
cp "$busybox" "$root/bin/busybox"
# The applets the two scripts use, as links (busybox --install would need
# /proc mounted first, and then the scripts could not say what failed).
for applet in sh mount poweroff sleep cat echo grep sed tail date timeout uname nproc env ls; do
    ln -s busybox "$root/bin/$applet"
done
cp -a "$sysroot"/lib/*.so.[0-9]* "$root/lib/" # ld-linux*.so.N among them

shopt -s nullglob
for binary in "$build"/tests/* "$build"/preload/*; do
    [ -f "$binary" ] && [ -x "$binary" ] && cp "$binary" "$root/pcm/${binary#"$build"/}"
done
cp "$build/libpcmalloc.so" "$root/pcm/"
ln -s libpcmalloc.so "$root/pcm/libpcmalloc.so.1"
cp "$here/vm-init.sh" "$root/init"
cp "$here/vm-suite.sh" "$root/pcm/vm-suite.sh"
chmod 755 "$root/init" "$root/pcm/vm-suite.sh"

# gzip -1: the guest unpacks it under emulation, and the kernel's gzip is
# the one decompressor every Debian kernel has built in (CONFIG_RD_GZIP).
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
echo "vm-initramfs: $out ($(du -h "$out" | cut -f 1)): $(ls "$root/pcm/tests" | wc -l) tests, $(ls "$root/pcm/preload" | wc -l) preload programs, $(ls "$root/lib" | wc -l) libraries"
