#!/usr/bin/env bash
# scripts/demo.sh LIB - the main job: real programs with pcmalloc preloaded,
# timed beside the same programs on glibc's malloc, then pcmalloc's own
# report of what it served.
set -eu
lib=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/dicts.py" <<'PY'
import threading
def work():
    for _ in range(100):
        d = {("k%d" % i): [i, str(i) * (i % 7)] for i in range(5000)}
        del d
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("python3: 8 threads built and dropped 800 dicts of 5000 entries")
PY
perl_append='my $n = 0; for (1 .. 300) { my $y = ""; $y .= "." x 4096 for 1 .. 350; $n += length $y } print "perl: appended 4 KiB 350 times, 300 rounds, $n bytes\n"'

timed() { # label, command...
    local start end
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v l="$label" 'BEGIN { printf "   %-10s %.2f s\n", l, e - s }'
}

for program in python perl; do
    echo "== $program"
    for allocator in glibc pcmalloc; do
        label=$allocator
        preload=
        [ "$allocator" = pcmalloc ] && preload=$lib
        if [ "$program" = python ]; then
            timed env ${preload:+LD_PRELOAD=$preload} /usr/bin/python3 "$work/dicts.py"
        else
            timed env ${preload:+LD_PRELOAD=$preload} perl -e "$perl_append"
        fi
    done
done
echo "== pcmalloc's report for the perl run (PCMALLOC_STATS=1)"
LD_PRELOAD=$lib PCMALLOC_STATS=1 perl -e "$perl_append" 2>&1 | head -n 12
