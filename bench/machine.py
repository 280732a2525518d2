"""bench/machine.py - a description of the machine a run happened on, for
the report: figures from different machines must never be compared
without the reader seeing that they differ.

Reads /proc, /sys, /etc/os-release and uname only; changes nothing.
"""

import datetime
import os
import platform
import subprocess


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _cpu_model():
    for line in _read("/proc/cpuinfo").splitlines():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory_gib():
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / (1024 * 1024)
    return 0.0


def _os_name():
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.system()


def _gcc_version():
    try:
        out = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True,
                             check=False).stdout.strip()
    except OSError:
        out = ""
    return out or "unknown"


def describe():
    """An ordered list of (what, value) pairs."""
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or "unknown"
    except (ValueError, OSError):
        glibc = "unknown"
    online = _read("/sys/devices/system/cpu/online").strip() or "?"
    load = " ".join(_read("/proc/loadavg").split()[:3])
    return [
        ("CPU", _cpu_model()),
        ("CPUs", f"{os.cpu_count()} (online: {online}); this process may use "
                 f"{len(os.sched_getaffinity(0))}"),
        ("memory", f"{_memory_gib():.1f} GiB"),
        ("kernel", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("system", _os_name()),
        ("C library", glibc),
        ("compiler", f"gcc {_gcc_version()} (benchmarks built -O2)"),
        ("load average at start", load),
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
    ]
