#!/usr/bin/env bash
# tests/programs/git_workload.bash GIT SOURCE REPO - one git session, for
# git.sh to run without and with pcmalloc preloaded: copy the generated
# tree SOURCE to REPO (emptied first), init, add and commit its thousands of
# files, three more commits that edit, rename and delete, then log, diff,
# grep, blame, archive, gc and fsck.  It prints only what must be the same
# in both runs: names, dates and identities are fixed, so every object id
# is too.  (Not pack sizes: pack-objects' delta search runs in threads.)
set -eu
git=$1
source=$2
repo=$3
export HOME=$repo.home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=pcmalloc GIT_AUTHOR_EMAIL=pcmalloc@example.org
export GIT_COMMITTER_NAME=pcmalloc GIT_COMMITTER_EMAIL=pcmalloc@example.org
export GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'
rm -rf "$repo" "$HOME"
mkdir -p "$HOME"
cp -r "$source" "$repo"
cd "$repo"

"$git" init -q -b main
"$git" add -A
"$git" commit -q -m "the generated tree"
# Edit the files whose number ends in 7, rename a directory, delete those
# whose number ends in 11.
find . -path ./.git -prune -o -type f -name '*7.txt' -print | sort | xargs sed -i 's/line 1 /line one /'
"$git" commit -q -a -m "edit"
"$git" mv d03 renamed
"$git" commit -q -m "rename"
find . -path ./.git -prune -o -type f -name '*11.txt' -print | sort | xargs "$git" rm -q
"$git" commit -q -m "delete"

"$git" log --format='%H %s' --shortstat
"$git" diff --stat HEAD~3 HEAD | tail -n 1
"$git" diff HEAD~2 HEAD~1 | md5sum
"$git" grep -c 'line one' HEAD -- d07 | head -n 5
"$git" blame --porcelain d07/f0007.txt | grep -c '^[0-9a-f]\{40\} '
"$git" archive --format=tar HEAD | md5sum
"$git" gc -q
"$git" fsck --full --strict
"$git" count-objects -v | grep -E '^(count|in-pack|packs):'
"$git" rev-list --all --objects | wc -l
"$git" rev-parse HEAD HEAD^{tree}
