"""bench/measure.py - one run of one benchmark program under one allocator:
start it through bench/spawn (which sets LD_PRELOAD for the program only,
pins it if asked, and reports its exit, its own peak RSS and its
voluntary context switches from wait4),
kill it past a time limit, and read its result line.

Whatever the program does - crash, hang, print garbage, report a corrupt
object - comes back as an Outcome with a status; nothing here raises for a
failure of the program under test, so one crashing allocator cannot stop
the suite. Only the processes started here (the launcher and the program,
in the new session the launcher leads) are ever killed.
"""

import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

# Optional: figures a program measures besides its result (fragmentation's
# resident sets), as key=number pairs; kept in runs.csv and tabled.
MEASURES_LINE = re.compile(r"^measures: (.*?)\s*$", re.MULTILINE)
RESULT_LINE = re.compile(
    r"^result: (time|throughput)=(\S+) (\S+) checksum=([0-9a-f]{16})\s*$", re.MULTILINE)

# Exit status the programs use for a failed check of their own (bench.h).
EXIT_CORRUPT = 3


@dataclass
class Outcome:
    status: str  # ok, crash, exit, timeout, corrupt, no-result (bad-checksum set later)
    metric: str = ""  # time or throughput
    value: float = 0.0
    unit: str = ""
    checksum: str = ""
    wall_s: float = 0.0
    maxrss_kb: int = 0
    sleeps: int = 0  # voluntary context switches of the process (wait4's ru_nvcsw)
    detail: str = ""  # for a failure: what happened, for the report
    measures: str = ""  # "key=value ..." from a measures: line, if any

    @property
    def ok(self):
        return self.status == "ok"


def _environment(preload, extra_env=None):
    """The launcher's environment: the runner's, the allocator's own
    variables (a variant's settings, for this run only), and the preload
    handed on to the program alone."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(extra_env or {})
    env["BENCH_CHILD_PRELOAD"] = preload or ""
    return env


def _tail(data, lines=3):
    text = data.decode(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:])


def run(spawn, argv, preload=None, timeout_s=120.0, pin_cpu=None, extra_env=None):
    """Runs argv once through the launcher spawn and returns its Outcome;
    extra_env: variables set for this run only."""
    with tempfile.TemporaryDirectory() as work:
        report_path = os.path.join(work, "report")
        command = [spawn, report_path, "-" if pin_cpu is None else str(pin_cpu)] + list(argv)
        with open(os.path.join(work, "out"), "w+b") as out, \
                open(os.path.join(work, "err"), "w+b") as err:
            begin = time.monotonic()
            process = subprocess.Popen(command, env=_environment(preload, extra_env),
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                       start_new_session=True)
            try:
                process.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
            wall = time.monotonic() - begin
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        try:
            with open(report_path, encoding="utf-8") as f:
                report = f.read().split()
        except OSError:
            report = []

    outcome = Outcome("ok", wall_s=wall)
    if timed_out:
        outcome.status = "timeout"
        outcome.detail = f"killed after {timeout_s:.0f} s"
        return outcome
    if len(report) != 8:
        outcome.status = "exit"
        outcome.detail = f"the launcher failed (status {process.returncode}): {_tail(stderr)}"
        return outcome
    how, number = report[0], int(report[1])
    outcome.maxrss_kb = int(report[3])
    outcome.wall_s = float(report[5])
    outcome.sleeps = int(report[7])
    if how == "signal":
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        outcome.status = "crash"
        outcome.detail = name + (f": {_tail(stderr)}" if stderr.strip() else "")
    elif number == EXIT_CORRUPT:
        outcome.status = "corrupt"
        outcome.detail = _tail(stderr)
    elif number != 0:
        outcome.status = "exit"
        outcome.detail = f"exit status {number}: {_tail(stderr)}"
    else:
        match = RESULT_LINE.search(stdout.decode(errors="replace"))
        if not match:
            outcome.status = "no-result"
            outcome.detail = f"no result line; stdout: {_tail(stdout)}"
        else:
            outcome.metric, value, outcome.unit, outcome.checksum = match.groups()
            outcome.value = float(value)
            measures = MEASURES_LINE.search(stdout.decode(errors="replace"))
            if measures:
                outcome.measures = measures.group(1)
    return outcome
