#!/usr/bin/env bash
# tests/programs/git.sh - git on a generated tree of thousands of files:
# init, add, commits, log, diff, grep, blame, archive, gc and
# fsck (git_workload.bash), without and with pcmalloc preloaded into every
# git process (gc's pack-objects searches deltas in threads).
. "$(dirname "$0")/lib.sh"
git=$(program git) || no_program
files=$(scaled 3000)
# 40 directories of text files, 5 to 60 lines each, alike enough for
# delta compression to find bases.
awk -v n="$files" -v dir="$work/source" 'BEGIN {
    for (i = 0; i < n; i++) {
        d = sprintf("%s/d%02d", dir, i % 40)
        if (!(d in made)) { system("mkdir -p " d); made[d] = 1 }
        f = sprintf("%s/f%04d.txt", d, i)
        lines = 5 + (i * 37) % 56
        for (l = 1; l <= lines; l++)
            printf "line %d of file %d: %s\n", l, i, substr("abcdefghijklmnopqrstuvwxyz0123456789", 1 + (i + l) % 36) > f
        close(f)
    }
}'
compare_run "git-$files-files" bash "$(dirname "$0")/git_workload.bash" "$git" "$work/source" "$work/repo"
finish
