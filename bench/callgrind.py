"""bench/callgrind.py - the fast-path microbenchmark's measurement:
instructions per malloc+free pair, counted by valgrind's callgrind, which
repeats to the instruction where a time on a shared machine does not.

callgrind (unlike memcheck) does not replace malloc, so LD_PRELOAD set for
valgrind reaches the client program and the allocator under test is the
one counted. That is checked, not assumed: the program prints the shared
object its malloc calls reach (dladdr), which must be the preloaded one
(or libc, for glibc). Only the calls inside
bench/fastpath.c's measured_pairs are counted (--toggle-collect), so
start-up and the warm-up are left out; the loop's own cost, measured with
two empty functions in place of malloc and free, is subtracted.

Valgrind does not support restartable sequences, so under it glibc's
sched_getcpu() falls back to a system call wrapper; an allocator that asks
for the CPU on every call pays instructions there that it would not pay
natively. The instructions spent in sched_getcpu are therefore reported
beside the total.
"""

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

FUNCTION = "measured_pairs"


@dataclass
class Count:
    ok: bool
    per_pair: float = 0.0  # loop overhead subtracted
    getcpu_per_pair: float = 0.0  # of which in sched_getcpu
    detail: str = ""


def _run(binary, preload, args, workdir, timeout_s, extra_env=None):
    """Total Ir inside measured_pairs, the program's stdout, and an error.
    extra_env: the allocator's own variables, for this count only."""
    out_file = os.path.join(workdir, "callgrind.out")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(extra_env or {})
    if preload:
        env["LD_PRELOAD"] = preload
    command = ["valgrind", "--tool=callgrind", f"--toggle-collect={FUNCTION}",
               f"--callgrind-out-file={out_file}", binary] + args
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return None, "", f"valgrind timed out after {timeout_s:.0f} s"
    if done.returncode != 0 or not os.path.exists(out_file):
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return None, "", f"valgrind exit {done.returncode}: {tail}"
    with open(out_file, encoding="utf-8", errors="replace") as f:
        profile = f.read()
    match = re.search(r"^totals:\s+(\d+)", profile, re.MULTILINE) or \
        re.search(r"^summary:\s+(\d+)", profile, re.MULTILINE)
    if not match:
        return None, done.stdout, "no totals line in the callgrind profile"
    return int(match.group(1)), done.stdout, ""


def _exclusive_in(profile_path, function):
    """Instructions spent in function itself (exclusive), from
    callgrind_annotate; 0 when it does not appear."""
    try:
        text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100",
                               profile_path], capture_output=True, text=True,
                              check=False).stdout
    except OSError:
        return 0
    total = 0
    for line in text.splitlines():
        # "N (P%)  file:function [object]"; the "=> file:function" lines
        # of the annotated source are calls, counted already.
        match = re.match(r"^\s*([\d,]+)\s+\([\d.]+%\)\s+[^=\s]\S*:" + re.escape(function)
                         + r" \[", line)
        if match:
            total += int(match.group(1).replace(",", ""))
    return total


def _reached(stdout):
    """The shared object the program's malloc calls reach."""
    match = re.search(r"^malloc-from: (.+)$", stdout, re.MULTILINE)
    return match.group(1).strip() if match else None


def _is_expected(reached, preload):
    if reached is None:
        return False
    if preload:
        return os.path.realpath(reached) == os.path.realpath(preload)
    return os.path.basename(reached).startswith("libc.so")


def loop_overhead(binary, size, args, timeout_s=300):
    """Ir per pair of the loop with empty functions: the part of every
    count that is not the allocator's."""
    pairs = int(dict(a.split("=") for a in args)["pairs"])
    with tempfile.TemporaryDirectory() as workdir:
        total, _, error = _run(binary, None, [f"size={size}", "baseline=1"] + args,
                               workdir, timeout_s)
    return None if total is None else total / pairs, error


def measure(binary, preload, size, args, overhead, timeout_s=300, extra_env=None):
    """Instructions per malloc+free pair for one allocator and size."""
    pairs = int(dict(a.split("=") for a in args)["pairs"])
    with tempfile.TemporaryDirectory() as workdir:
        total, stdout, error = _run(binary, preload, [f"size={size}"] + args, workdir, timeout_s,
                                    extra_env)
        if total is None:
            return Count(False, detail=error)
        reached = _reached(stdout)
        if not _is_expected(reached, preload):
            return Count(False, detail=f"malloc reached {reached or 'an unknown object'}, not "
                                       f"{preload or 'libc'}: the preload did not take effect")
        getcpu = _exclusive_in(os.path.join(workdir, "callgrind.out"), "sched_getcpu")
    return Count(True, total / pairs - overhead, getcpu / pairs)
