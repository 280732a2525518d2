#!/usr/bin/env bash
# tests/drop_in/static_link.sh - programs linked with libpcmalloc.a.
#   - A C program that calls malloc and free but not realloc still gets
#     all of pcmalloc's names (src/preload.c: pcm_preload_linked), so its
#     C library's own reallocs (open_memstream's buffer) stay pcmalloc's,
#     and the report at exit (PCMALLOC_STATS) comes with them;
#     dynamically linked and fully static (-static), which glibc's
#     malloc.o must then not join.
#   - A C++ program: pcmalloc's operator new serves it, and out of memory
#     it behaves as the language says - the new handler runs until it
#     gives up, then std::bad_alloc is thrown; the nothrow forms return
#     NULL - both linked dynamically (libstdc++.so's operator takes over
#     the failure) and fully static (no dynamic symbols, so
#     src/preload_cxx.c runs the handler loop itself with the program's
#     libstdc++.a functions).  A static program that never linked
#     std::__throw_bad_alloc ends with pcmalloc's message instead.
# shellcheck source=tests/drop_in/lib.sh
. "$(dirname "$0")/lib.sh"

ARCHIVE=$BUILD/libpcmalloc.a
cat >"$work/memstream.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    free(malloc(10)); /* malloc and free are all it names */
    char *text;
    size_t size;
    FILE *stream = open_memstream(&text, &size); /* grown by the C library's realloc */
    for (int i = 0; i < 100000; i++)
        fprintf(stream, "line %d\n", i);
    fclose(stream);
    printf("%zu bytes\n", size);
    free(text);
    return 0;
}
C
cat >"$work/oom.cpp" <<'CPP'
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

static int handler_calls;
static void give_up_on_third_call() {
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}

int main(int argc, char **argv) {
    std::vector<std::string> names(3, "name"); /* as most programs do */
    const size_t huge = (size_t)-1 / 4;          /* above PTRDIFF_MAX: fails at once */
    const bool handler = argc > 1 && !strcmp(argv[1], "handler");
    if (handler)
        std::set_new_handler(give_up_on_third_call);
    try {
        char *p = new char[huge];
        printf("new: no exception (%p)\n", (void *)p);
    } catch (const std::bad_alloc &) {
        printf("new: bad_alloc after %d handler calls\n", handler_calls);
    }
    handler_calls = 0;
    if (handler)
        std::set_new_handler(give_up_on_third_call);
    try {
        void *p = ::operator new(huge, std::align_val_t(64));
        printf("aligned new: no exception (%p)\n", p);
    } catch (const std::bad_alloc &) {
        printf("aligned new: bad_alloc after %d handler calls\n", handler_calls);
    }
    void *q = new (std::nothrow) char[huge];
    void *r = ::operator new(huge, std::align_val_t(64), std::nothrow);
    printf("nothrow: %s, aligned nothrow: %s\n", q ? "an object" : "NULL", r ? "an object" : "NULL");
    int *small = new int(names.size());
    printf("new int: %d\n", *small);
    delete small;
    return 0;
}
CPP
cat >"$work/bare.cpp" <<'CPP'
#include <cstdio>
#include <new>
int main() {
    try {
        char *p = new char[(size_t)-1 / 4];
        std::printf("no exception (%p)\n", (void *)p);
    } catch (...) {
        std::printf("caught\n");
    }
    return 0;
}
CPP

# build NAME SOURCE [FLAGS...]: compile it (gcc or g++ by its suffix)
# against the archive; a failed build, or one with a warning of two
# definitions, is a failure of NAME.
build() {
    local name=$1 source=$2 compiler=gcc
    shift 2
    [ "${source##*.}" = cpp ] && compiler=g++
    if $compiler -O1 -o "$work/$name" "$source" "$ARCHIVE" -lpthread "$@" 2>"$work/$name.log" &&
        ! grep -q "multiple definition" "$work/$name.log"; then
        pass "build_$name"
        return 0
    fi
    fail "build_$name" "$compiler failed: $(grep -m 3 -i -e error -e "multiple definition" "$work/$name.log")"
    return 1
}

# address NAME: where the last nm listing defines NAME ("" if nowhere).
address() {
    awk -v name="$1" '$3 == name {print $1; exit}' "$work/symbols"
}

for link in dynamic static; do
    flags=()
    [ $link = static ] && flags=(-static)
    if build "c_$link" "$work/memstream.c" "${flags[@]}"; then
        nm "$work/c_$link" >"$work/symbols"
        check "c_${link}_defines_realloc" grep -q " T realloc$" "$work/symbols"
        check "c_${link}_malloc_is_pcmallocs" test "$(address malloc)" = "$(address pcm_malloc)"
        check "c_${link}_has_no_glibc_malloc" lacks "$work/symbols" " _int_malloc"
        PCMALLOC_VERBOSE=1 "$work/c_$link" >"$work/out" 2>"$work/err"
        check "c_${link}_exits_0" test $? -eq 0
        check "c_${link}_output" contains "$work/out" "1088890 bytes"
        check "c_${link}_served_by_pcmalloc" contains "$work/err" "pcmalloc: pcmalloc $VERSION"
        PCMALLOC_STATS=1 "$work/c_$link" >/dev/null 2>"$work/err" # (the report: preload.c's, brought along)
        check "c_${link}_reports_at_exit" contains "$work/err" "pcmalloc: statistics of pcmalloc $VERSION"
    fi
done

# expect_run NAME PROGRAM [ARGUMENTS...]: exits 0, served by pcmalloc, and
# prints what the language promises (the handler: three calls).
expect_run() {
    local name=$1 calls=0
    shift
    [ "${2:-}" = handler ] && calls=3
    PCMALLOC_VERBOSE=1 "$@" >"$work/out" 2>"$work/err"
    check "${name}_exits_0" test $? -eq 0
    check "${name}_served_by_pcmalloc" contains "$work/err" "pcmalloc: pcmalloc $VERSION"
    check "${name}_new_throws" contains "$work/out" "new: bad_alloc after $calls handler calls"
    check "${name}_aligned_new_throws" contains "$work/out" "aligned new: bad_alloc after $calls handler calls"
    check "${name}_nothrow_null" contains "$work/out" "nothrow: NULL, aligned nothrow: NULL"
    check "${name}_small_new" contains "$work/out" "new int: 3"
}

if build dynamic "$work/oom.cpp"; then
    check dynamic_links_libstdcxx_so grep -q "libstdc++" <(readelf -d "$work/dynamic")
    expect_run dynamic "$work/dynamic"
    expect_run dynamic_handler "$work/dynamic" handler
fi

if build static "$work/oom.cpp" -static; then
    check static_has_no_dynamic_section test -z "$(readelf -d "$work/static" | grep -i needed)"
    expect_run static "$work/static"
    expect_run static_handler "$work/static" handler
fi

# (A toolchain whose libstdc++.a brings __throw_bad_alloc in anyway makes
# this one throw too.)
if build static_bare "$work/bare.cpp" -static; then
    rc=$({ "$work/static_bare" >"$work/out" 2>"$work/err"; echo $?; } 2>/dev/null) # (the shell's "Aborted" too)
    if nm "$work/static_bare" | grep -q " _ZSt17__throw_bad_allocv$"; then
        check static_bare_with_throw_bad_alloc_throws test "$rc" -eq 0
        check static_bare_caught contains "$work/out" "caught"
    else
        check static_bare_without_throw_bad_alloc_aborts test "$rc" -eq 134
        check static_bare_says_why contains "$work/err" \
            "out of memory, and no C++ runtime found to report it (std::bad_alloc)"
    fi
fi
finish
