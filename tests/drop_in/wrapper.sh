#!/usr/bin/env bash
# tests/drop_in/wrapper.sh - the `pcmalloc` command as a new user meets it
# (tools/pcmalloc.in, built as build/<ARCH>/pcmalloc): --help, --version,
# running a program with --stats and --stats=json, its exit status and
# arguments untouched, `--`, an existing LD_PRELOAD kept, --secure (the
# hardened library) and --verbose, the errors (unknown option, no program,
# no library, no such program), finding the library through ../lib, and all of it under dash
# (the wrapper is POSIX sh).
# shellcheck source=tests/drop_in/lib.sh
. "$(dirname "$0")/lib.sh"

seq 1 3000 | sed 's/$/ line/' | sort -R --random-source=/dev/zero >"$work/input" 2>/dev/null ||
    seq 3000 -1 1 >"$work/input"
sort "$work/input" >"$work/sorted"

# --help and --version
"$WRAPPER" --help >"$work/help" 2>&1
check help_exits_0 test $? -eq 0
check help_usage contains "$work/help" "Usage: pcmalloc [OPTION]... [--] PROGRAM [ARGUMENT]..."
check help_names_options contains "$work/help" "--stats=json"
check help_says_what_secure_sets contains "$work/help" "PCMALLOC_HARDENED=1"
"$WRAPPER" --version >"$work/version" 2>&1
check version_line test "$(cat "$work/version")" = "pcmalloc $VERSION ($BUILD/libpcmalloc.so.1)"

# a program under it: same output, statistics at exit
"$WRAPPER" --stats sort "$work/input" >"$work/out" 2>"$work/err"
check stats_run_exits_0 test $? -eq 0
check stats_run_same_output cmp -s "$work/out" "$work/sorted"
check stats_run_table_at_exit served_by_pcmalloc "$work/err"
"$WRAPPER" --stats=json sort "$work/input" >"$work/out" 2>"$work/err"
check json_run_same_output cmp -s "$work/out" "$work/sorted"
check json_run_is_json valid_json "$work/err"
check json_run_names_fast_path contains "$work/err" '"fast_path": "'

# the program's exit status and arguments, unchanged
check exit_status_is_the_programs status_is 7 "$WRAPPER" sh -c 'exit 7'
check arguments_unchanged test "$("$WRAPPER" printf '%s|' 'a b' '' '*' 'c')" = "a b||*|c|"
"$WRAPPER" -- printf '%s' --stats >"$work/out" 2>"$work/err"
check double_dash_ends_options test "$(cat "$work/out")" = "--stats"
check double_dash_no_stats lacks "$work/err" "statistics"

# the environment the program sees
check ld_preload_first_others_kept test "$(LD_PRELOAD=libm.so.6 "$WRAPPER" sh -c 'echo "$LD_PRELOAD"')" = \
    "$BUILD/libpcmalloc.so.1 libm.so.6"
check secure_sets_hardened test "$("$WRAPPER" --secure sh -c 'echo "$PCMALLOC_HARDENED"')" = 1
"$WRAPPER" --secure --verbose true 2>"$work/err"
check verbose_shows_hardened_in_force contains "$work/err" "PCMALLOC_HARDENED=1"
check verbose_shows_version contains "$work/err" "pcmalloc: pcmalloc $VERSION, "
check secure_preloads_the_hardened_library test "$("$WRAPPER" --secure sh -c 'echo "$LD_PRELOAD"')" = \
    "$BUILD/libpcmalloc-hardened.so.1"
check secure_runs_the_hardened_build contains "$work/err" "pcmalloc: hardened build: "
PCMALLOC_HARDENED=1 "$WRAPPER" true 2>"$work/err"
check default_library_warns_of_hardened contains "$work/err" "preload libpcmalloc-hardened.so"
"$WRAPPER" --secure sort "$work/input" >"$work/out" 2>"$work/err"
check secure_run_same_output cmp -s "$work/out" "$work/sorted"

# errors: exit status 2 and a message, or the shell's 127
"$WRAPPER" --bogus true >"$work/out" 2>"$work/err"
check unknown_option_exits_2 test $? -eq 2
check unknown_option_named contains "$work/err" "pcmalloc: unknown option '--bogus'"
check no_program_exits_2 status_is 2 "$WRAPPER" --stats
check missing_lib_exits_2 status_is 2 "$WRAPPER" --lib="$work/nothing.so" true
check no_such_program_exits_127 status_is 127 "$WRAPPER" ./no-such-program-here

# an install moved elsewhere: the library is found in ../lib
mkdir -p "$work/moved/bin" "$work/moved/lib"
cp "$WRAPPER" "$work/moved/bin/pcmalloc"
cp "$LIB" "$work/moved/lib/libpcmalloc.so.1"
check finds_library_in_dot_dot_lib test "$("$work/moved/bin/pcmalloc" --version)" = \
    "pcmalloc $VERSION ($work/moved/lib/libpcmalloc.so.1)"
check pcmalloc_lib_overrides test "$(PCMALLOC_LIB="$work/moved/lib/libpcmalloc.so.1" "$WRAPPER" --version)" = \
    "pcmalloc $VERSION ($work/moved/lib/libpcmalloc.so.1)"

# plain POSIX sh
dash "$WRAPPER" --stats sort "$work/input" >"$work/out" 2>"$work/err"
check dash_runs_it cmp -s "$work/out" "$work/sorted"
check dash_stats served_by_pcmalloc "$work/err"
finish
