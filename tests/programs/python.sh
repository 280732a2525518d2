#!/usr/bin/env bash
# python3 building and dropping large dicts and lists across threads, with
# PYTHONMALLOC=malloc: CPython's own pools would otherwise serve every
# object of 512 bytes or less, and malloc would see a few thousand calls.
# Natively only: under qemu-user (PCM_RUN set) it would double the run time.
. "$(dirname "$0")/lib.sh"
[ -n "$PCM_RUN" ] || export PYTHONMALLOC=malloc
python=$(program python3 python3.11) || no_program
cat >"$work/dicts.py" <<PY
import threading
results = [None] * 8
def work(n):
    total = 0
    for rnd in range($(scaled 60)):
        d = {("k%d" % i): [i, str(i) * (i % 7), {"x": i}] for i in range(3000)}
        l = [v for v in d.values() if v[0] % 3 == 0]
        total += len(l) + sum(len(v[1]) for v in l)
        del d, l
    results[n] = total
threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(results)
PY
compare_run python3-dicts-threads "$python" "$work/dicts.py"
finish
