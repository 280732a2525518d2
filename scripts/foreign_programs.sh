#!/usr/bin/env bash
# scripts/foreign_programs.sh ARCH - the real programs (perl, sort, python3.11)
# of the Debian architecture ARCH (i386 or arm64), for the cross builds' test
# suites to run under qemu-user with pcmalloc preloaded.
#
# Nothing is installed: the packages and the libraries they need are only
# downloaded (apt-get download) into build/foreign/ARCH/debs/ and unpacked
# (dpkg-deb -x) into build/foreign/ARCH/root/.  What the cross C library
# already holds (/usr/i686-linux-gnu, /usr/aarch64-linux-gnu: libc6,
# libgcc-s1, libstdc++6...) is not fetched, and neither are dpkg and tar,
# which perl-base pre-depends on only for its own installation.  The guest
# runs with QEMU_LD_PREFIX = the cross sysroot and
#     LD_LIBRARY_PATH = <sysroot>/lib:<root>/lib/<triplet>:<root>/usr/lib/<triplet>
#     PYTHONHOME = <root>/usr, PERL5LIB = <root>/usr/lib/<triplet>/perl-base
# (qemu/run-tests.sh sets them), the programs by absolute path in <root>.
#
# The system changes only as scripts/debian_fetch.sh says (the architecture
# added to dpkg, its package lists fetched).  Idempotent: once complete, a
# second run only checks its stamp, with no network.  Exit status non-zero when anything is
# missing and could not be fetched.
set -eu
cd "$(dirname "$0")/.."
. scripts/debian_fetch.sh
arch=${1:-}
case "$arch" in
i386 | arm64) ;;
*)
    echo "usage: scripts/foreign_programs.sh i386|arm64" >&2
    exit 2
    ;;
esac
# The programs the suites run, and what never to fetch: the cross sysroot's
# own packages (checked below: any X with X-ARCH-cross installed), plus
# these (gcc-12-base holds only documentation).
wanted=(perl-base coreutils python3.11-minimal)
skip=" libc6 libgcc-s1 gcc-12-base dpkg tar "

dir=build/foreign/$arch
root=$dir/root
stamp=$root/.complete
say() { echo "foreign-programs[$arch]: $*"; }
die() {
    echo "foreign-programs[$arch]: $*" >&2
    exit 1
}

# Done already?  The stamp's first line is the wanted list it was made for.
if [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "${wanted[*]}" ]; then
    say "ready in $root ($(($(wc -l <"$stamp") - 1)) packages)"
    exit 0
fi

debian_fetch_lists "$arch" || die "cannot read the $arch package lists"

# Resolve the dependencies (Depends and Pre-Depends; of alternatives, the
# first real package) for $arch only, from one recursive apt-cache call
# (each call rebuilds apt's cache: seconds), walking its graph from the
# wanted packages without entering the skipped ones.
graph=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${wanted[@]/%/:$arch}" 2>/dev/null) || true
for p in "${wanted[@]}"; do
    grep -qx "$p:$arch" <<<"$graph" || die "no package $p for $arch in the package lists"
done
for p in $(sed -n "s/^\([^ <]*\):$arch\$/\1/p" <<<"$graph"); do
    dpkg-query -W -f='${Status}' "$p-$arch-cross" 2>/dev/null | grep -q 'install ok installed' &&
        skip="$skip$p "
done
order=$(awk -v arch="$arch" -v wanted="${wanted[*]}" -v skip="$skip" '
    # "name:arch" heads a package; " |Depends: a" is an alternative that
    # more lines continue, up to the last "  Depends: b".  "<virtual>"
    # names (their providers follow, indented deeper) and other
    # architectures are left out.
    function strip(n) {
        if (n ~ ":" arch "$") { sub(":" arch "$", "", n); return n }
        return (n ~ /:/) ? "" : n
    }
    /^[^ ]/ { cur = strip($1); grouped = 0; next }
    /^ [ |](Pre)?Depends: / {
        if (!grouped) taken = 0
        grouped = ($1 ~ /^[|]/)
        if (cur == "" || taken || $2 ~ /^</) next
        dep = strip($2)
        if (dep != "") { deps[cur] = deps[cur] " " dep; taken = 1 }
    }
    END {
        ns = split(skip, s, " ")
        for (i = 1; i <= ns; i++) skipped[s[i]] = 1
        n = split(wanted, q, " ")
        for (i = 1; i <= n; i++) {
            p = q[i]
            if (p in done || p in skipped) continue
            done[p] = 1
            print p
            m = split(deps[p], d, " ")
            for (j = 1; j <= m; j++) q[++n] = d[j]
        }
    }' <<<"$graph") || die "could not resolve the dependencies"
mapfile -t packages <<<"$order"

# Download what is not cached yet (one deb per package, any version).
debian_fetch_debs "$dir/debs" "$arch" "${packages[@]}" || die "could not download the packages"

# Unpack everything into a fresh root; a deb that does not unpack is
# removed so that the next run fetches it again.
rm -rf "$root.tmp"
mkdir -p "$root.tmp"
debs=()
for p in "${packages[@]}"; do
    deb=$(debian_cached_deb "$dir/debs" "$arch" "$p") || die "no deb of $p in $dir/debs"
    if ! dpkg-deb -x "$deb" "$root.tmp"; then
        rm -f "$deb"
        die "could not unpack $deb (removed; run again)"
    fi
    debs+=("$(basename "$deb")")
done
rm -rf "$root"
mv "$root.tmp" "$root"
{
    echo "${wanted[*]}"
    printf '%s\n' "${debs[@]}"
} >"$stamp"
size=$(cd "$dir/debs" && du -ch "${debs[@]}" | tail -n 1 | cut -f 1)
say "${#debs[@]} packages ($size of debs) unpacked in $root: ${packages[*]}"
