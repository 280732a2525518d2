#!/usr/bin/env bash
# tests/drop_in/install.sh - `make install` as a user runs it, staged in a
# temporary DESTDIR: the files and links it installs (a versioned library
# whose soname is the major version), a program built against it with
# `pkg-config --cflags --libs pcmalloc` (shared) and with the static
# library, both run and checked to be served by pcmalloc; the installed
# wrapper; the man page (renders without warnings); PREFIX baked into
# the .pc file and the wrapper; and `make uninstall` leaving nothing.
# shellcheck source=tests/drop_in/lib.sh
. "$(dirname "$0")/lib.sh"
arch=$(basename "$BUILD")
major=${VERSION%%.*}
make_quiet() { ${MAKE:-make} --no-print-directory -s ARCH="$arch" "$@" >"$work/make.log" 2>&1 || { cat "$work/make.log"; return 1; }; }

stage=$work/stage
prefix=/usr/local
root=$stage$prefix
check make_install make_quiet install DESTDIR="$stage"

# the files and links
check real_library_file test -f "$root/lib/libpcmalloc.so.$VERSION" -a ! -L "$root/lib/libpcmalloc.so.$VERSION"
check soname_link test "$(readlink "$root/lib/libpcmalloc.so.$major")" = "libpcmalloc.so.$VERSION"
check dev_link test "$(readlink "$root/lib/libpcmalloc.so")" = "libpcmalloc.so.$major"
check soname_in_library grep -q "Library soname: \[libpcmalloc.so.$major\]" <(readelf -d "$root/lib/libpcmalloc.so.$VERSION")
check static_library test -f "$root/lib/libpcmalloc.a"
check hardened_library test -f "$root/lib/libpcmalloc-hardened.so.$VERSION" -a \
    "$(readlink "$root/lib/libpcmalloc-hardened.so.$major")" = "libpcmalloc-hardened.so.$VERSION"
check hardened_soname grep -q "Library soname: \[libpcmalloc-hardened.so.$major\]" \
    <(readelf -d "$root/lib/libpcmalloc-hardened.so.$VERSION")
check header cmp -s "$root/include/pcmalloc.h" include/pcmalloc.h
check wrapper_executable test -x "$root/bin/pcmalloc"
check man_page test -f "$root/share/man/man7/pcmalloc.7"
check pc_file test -f "$root/lib/pkgconfig/pcmalloc.pc"

# pkg-config, as it would answer after a system-wide install (the sysroot
# prefixes the staged paths; pkgconf ends its answers with a space)
pc() { PKG_CONFIG_PATH="$root/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config "$@" | sed 's/ *$//'; }
check pkg_config_version test "$(pc --modversion pcmalloc)" = "$VERSION"
check pkg_config_cflags test "$(pc --cflags pcmalloc)" = "-I$root/include"
check pkg_config_libs test "$(pc --libs pcmalloc)" = "-L$root/lib -lpcmalloc"
check pkg_config_static_libs test "$(pc --static --libs pcmalloc)" = "-L$root/lib -lpcmalloc -lpthread"

# a program of the user's, built against the install
cat >"$work/app.c" <<'C'
#include <malloc.h>
#include <pcmalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    /* pcmalloc serves plain malloc too: 100 bytes get its 112-byte class */
    void *p = malloc(100);
    size_t usable = malloc_usable_size(p);
    free(p);
    void *q = pcm_malloc(1000);
    if (!q || pcm_malloc_usable_size(q) < 1000)
        return 1;
    pcm_free(q);
    char json[64];
    size_t whole = pcm_stats_json(json, sizeof json);
    printf("pcmalloc %s, malloc(100) usable %zu, stats %s\n", PCMALLOC_VERSION, usable,
           whole > sizeof json && strncmp(json, "{\"version\": \"" PCMALLOC_VERSION "\"", 17) == 0 ? "ok" : "bad");
    return 0;
}
C
expected="pcmalloc $VERSION, malloc(100) usable 112, stats ok"
# shellcheck disable=SC2046 # pkg-config's words are meant to split
if cc -o "$work/app" "$work/app.c" $(pc --cflags --libs pcmalloc); then
    pass build_with_pkg_config
    check app_needs_soname grep -q "Shared library: \[libpcmalloc.so.$major\]" <(readelf -d "$work/app")
    check app_runs test "$(LD_LIBRARY_PATH="$root/lib" "$work/app")" = "$expected"
else
    fail build_with_pkg_config "cc ... \$(pkg-config --cflags --libs pcmalloc) failed"
fi
# shellcheck disable=SC2046 # (the README's static line)
if cc -o "$work/app_static" "$work/app.c" $(pc --cflags pcmalloc) "$root/lib/libpcmalloc.a" -lpthread; then
    pass build_static
    check static_app_needs_no_library test -z "$(readelf -d "$work/app_static" | grep libpcmalloc)"
    check static_app_runs test "$("$work/app_static")" = "$expected"
else
    fail build_static "cc with libpcmalloc.a failed"
fi

# the installed wrapper and man page
check installed_wrapper_version test "$("$root/bin/pcmalloc" --version)" = \
    "pcmalloc $VERSION ($root/lib/libpcmalloc.so.$major)"
seq 2000 -1 1 >"$work/input"
"$root/bin/pcmalloc" --stats sort -n "$work/input" >"$work/out" 2>"$work/err"
check installed_wrapper_runs test "$(head -n 1 "$work/out")" = 1
check installed_wrapper_stats served_by_pcmalloc "$work/err"
groff -t -man -ww -z "$root/share/man/man7/pcmalloc.7" >"$work/groff" 2>&1
check man_page_renders_cleanly test ! -s "$work/groff"
check man_page_version grep -q "^\.TH PCMALLOC 7 .*\"pcmalloc $VERSION\"" "$root/share/man/man7/pcmalloc.7"
check man_page_paths contains "$root/share/man/man7/pcmalloc.7" "$prefix/lib/libpcmalloc.so.$major"

# uninstall leaves nothing but the directories
check make_uninstall make_quiet uninstall DESTDIR="$stage"
check nothing_left test -z "$(find "$stage" ! -type d)"

# another PREFIX: baked into the .pc file and the wrapper
check make_install_opt make_quiet install DESTDIR="$work/opt" PREFIX=/opt/pcmalloc
check opt_pc_prefix grep -qx "prefix=/opt/pcmalloc" "$work/opt/opt/pcmalloc/lib/pkgconfig/pcmalloc.pc"
check opt_pc_libdir grep -qx "libdir=/opt/pcmalloc/lib" "$work/opt/opt/pcmalloc/lib/pkgconfig/pcmalloc.pc"
check opt_wrapper_libdir grep -qx "libdir=/opt/pcmalloc/lib" "$work/opt/opt/pcmalloc/bin/pcmalloc"
# leave the build tree's wrapper as a plain `make` writes it
make_quiet lib
finish
