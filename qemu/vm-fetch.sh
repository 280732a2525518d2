#!/usr/bin/env bash
# qemu/vm-fetch.sh DEBARCH - what a whole-machine QEMU run of DEBARCH (arm64
# or i386) boots: Debian's own kernel of that architecture and its static
# busybox, into build/vm/DEBARCH/ as `vmlinuz`, `config` and `busybox`.
#
# Both packages are only downloaded (scripts/debian_fetch.sh: cached in
# build/vm/DEBARCH/debs/) and the three files extracted, nothing installed;
# the kernel's modules are not needed: the VM boots from an initramfs and
# talks over the serial console, and this script refuses a kernel that does
# not have built in all that this takes (checked in its config), and
# CONFIG_RSEQ, which the restartable-sequence fast path relies on.
# Idempotent: once complete, a second run checks its stamp, with no network.
set -eu
cd "$(dirname "$0")/.."
. scripts/debian_fetch.sh
debarch=${1:-}
# The kernel flavour: Debian's generic arm64 one; on i386 the 686 one (any
# i686, no PAE needed: the VMs have 2 GiB).  Common needs, then the
# console, the SMP topology and the power-off path of each machine.
needed=(RSEQ SMP BLK_DEV_INITRD RD_GZIP DEVTMPFS PROC_FS SYSFS TMPFS BINFMT_ELF BINFMT_SCRIPT)
case "$debarch" in
arm64)
    flavour=arm64
    needed+=(SERIAL_AMBA_PL011 SERIAL_AMBA_PL011_CONSOLE ARM_PSCI_FW)
    ;;
i386)
    flavour=686
    needed+=(SERIAL_8250 SERIAL_8250_CONSOLE ACPI SCHED_SMT)
    ;;
*)
    echo "usage: qemu/vm-fetch.sh arm64|i386" >&2
    exit 2
    ;;
esac

dir=build/vm/$debarch
stamp=$dir/.complete
say() { echo "vm-fetch[$debarch]: $*"; }
die() {
    echo "vm-fetch[$debarch]: $*" >&2
    exit 1
}

if [ -f "$stamp" ] && [ -s "$dir/vmlinuz" ] && [ -s "$dir/busybox" ]; then
    say "ready in $dir: $(tr '\n' ' ' <"$stamp")"
    exit 0
fi

debian_fetch_lists "$debarch" || die "cannot read the $debarch package lists"
# linux-image-<flavour> is the metapackage naming the current kernel.
kernel=$(apt-cache depends "linux-image-$flavour:$debarch" 2>/dev/null |
    sed -n "s/^ *Depends: \(linux-image-[0-9][^:]*\)\(:$debarch\)\?\$/\1/p" | head -n 1)
[ -n "$kernel" ] || die "no kernel package behind linux-image-$flavour:$debarch"
debian_fetch_debs "$dir/debs" "$debarch" "$kernel" busybox-static || die "could not download $kernel and busybox-static"
kernel_deb=$(debian_cached_deb "$dir/debs" "$debarch" "$kernel")
busybox_deb=$(debian_cached_deb "$dir/debs" "$debarch" busybox-static)

# Only ./boot of the kernel package (the modules are most of its size).
rm -rf "$dir/unpack" "$stamp"
mkdir -p "$dir/unpack"
dpkg-deb --fsys-tarfile "$kernel_deb" | tar -x -C "$dir/unpack" ./boot ||
    die "could not unpack ./boot from $kernel_deb"
dpkg-deb --fsys-tarfile "$busybox_deb" | tar -x -C "$dir/unpack" ./bin/busybox ||
    die "could not unpack ./bin/busybox from $busybox_deb"
version=${kernel#linux-image-}
[ -s "$dir/unpack/boot/vmlinuz-$version" ] || die "no /boot/vmlinuz-$version in $kernel_deb"
missing=()
for option in "${needed[@]}"; do
    grep -qx "CONFIG_$option=y" "$dir/unpack/boot/config-$version" || missing+=("CONFIG_$option")
done
[ ${#missing[@]} -eq 0 ] || die "$kernel lacks, built in: ${missing[*]}"
mv "$dir/unpack/boot/vmlinuz-$version" "$dir/vmlinuz"
mv "$dir/unpack/boot/config-$version" "$dir/config"
mv "$dir/unpack/bin/busybox" "$dir/busybox"
rm -rf "$dir/unpack"
printf '%s\n' "$(basename "$kernel_deb")" "$(basename "$busybox_deb")" >"$stamp"
say "kernel $version (${needed[*]} built in) and busybox in $dir"
