# scripts/debian_fetch.sh - sourced, not run: fetch Debian packages of
# another architecture (i386, arm64) without installing them, for the test
# suites that need that architecture's own binaries (scripts/foreign_programs.sh:
# perl, python3; qemu/vm-fetch.sh: the kernel and busybox for the VMs).
#
# The system changes only by `dpkg --add-architecture ARCH` and `apt-get
# update` when that architecture's package lists are missing (both need
# network and root, or sudo).  Downloads go into a cache folder under
# build/ that the callers keep, so a second run needs no network.  Each
# function prints its reason on stderr and returns non-zero on failure;
# the caller decides how to die.

debian_fetch_sudo=
[ "$(id -u)" -eq 0 ] || debian_fetch_sudo=sudo

# debian_fetch_lists ARCH: make sure apt knows ARCH's packages.
debian_fetch_lists() {
    local arch=$1 lists=/var/lib/apt/lists
    if [ "$(dpkg --print-architecture)" != "$arch" ] &&
        ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
        echo "debian-fetch: dpkg --add-architecture $arch" >&2
        $debian_fetch_sudo dpkg --add-architecture "$arch" || {
            echo "debian-fetch: could not add the architecture $arch" >&2
            return 1
        }
    fi
    compgen -G "$lists/*_binary-${arch}_Packages*" >/dev/null && return 0
    echo "debian-fetch: apt-get update (no $arch package lists yet)" >&2
    # A mirror in sync may fail one index (security, updates): what matters
    # is that the main lists of $arch came down.
    $debian_fetch_sudo apt-get update -qq || true
    compgen -G "$lists/*_binary-${arch}_Packages*" >/dev/null || {
        echo "debian-fetch: no $arch package lists after apt-get update (no network?)" >&2
        return 1
    }
}

# debian_cached_deb DIR ARCH PACKAGE: print the newest .deb of PACKAGE
# (built for ARCH, or for all) cached in DIR; status 1 when there is none.
debian_cached_deb() {
    local dir=$1 arch=$2 package=$3 debs
    debs=$(compgen -G "$dir/${package}_*_${arch}.deb" || compgen -G "$dir/${package}_*_all.deb") || return 1
    echo "$debs" | sort -V | tail -n 1
}

# debian_fetch_debs DIR ARCH PACKAGE...: apt-get download into DIR each
# PACKAGE of ARCH that has no .deb cached there yet (any version).
debian_fetch_debs() {
    local dir=$1 arch=$2 p
    shift 2
    local missing=()
    for p in "$@"; do
        debian_cached_deb "$dir" "$arch" "$p" >/dev/null || missing+=("$p:$arch")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    mkdir -p "$dir"
    echo "debian-fetch: apt-get download ${missing[*]}" >&2
    # As root, apt's download sandbox user (_apt) could not write to DIR.
    local sandbox=()
    [ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
    (cd "$dir" && apt-get download -qq "${sandbox[@]}" "${missing[@]}") || {
        echo "debian-fetch: apt-get download failed (no network?)" >&2
        return 1
    }
}
