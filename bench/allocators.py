"""bench/allocators.py - the allocators a run compares: pcmalloc (the
library under test) and the peers a user would pick instead, each brought
in by LD_PRELOAD (glibc's malloc is what a program gets with no preload).

Finds each peer's shared object where Debian installs it, names the
package and its version for the report, and checks that a preload really
takes effect: a library that the dynamic loader silently skips would make
its rows a second copy of glibc's.

Never installs anything (scripts/bench_deps.sh does) and never runs a
benchmark.
"""

import os
import subprocess
from dataclasses import dataclass

# Display order in every table and plot: the library under test first.
ORDER = ["pcmalloc", "glibc", "jemalloc", "tcmalloc", "mimalloc"]

# name -> (shared object, Debian package)
PEERS = {
    "glibc": (None, "libc6"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    "mimalloc": ("libmimalloc.so.2", "libmimalloc2.0"),
}


@dataclass
class Allocator:
    name: str
    preload: str | None  # absolute path for LD_PRELOAD, None for glibc
    is_peer: bool
    version: str
    problem: str | None = None  # why it cannot be run, if it cannot


def _library_dirs():
    """Where the dynamic loader looks on Debian, multiarch first."""
    dirs = []
    try:
        triplet = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                                 text=True, check=False).stdout.strip()
    except OSError:
        triplet = ""
    if triplet:
        dirs += [f"/usr/lib/{triplet}", f"/lib/{triplet}"]
    return dirs + ["/usr/lib64", "/usr/lib", "/lib64", "/lib"]


def _find_library(soname):
    for directory in _library_dirs():
        path = os.path.join(directory, soname)
        if os.path.exists(path):
            return path
    return None


def _package_version(package):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True, check=False)
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def _preload_takes_effect(path):
    """True when a process started with LD_PRELOAD=path has it mapped."""
    env = dict(os.environ, LD_PRELOAD=path)
    try:
        maps = subprocess.run(["cat", "/proc/self/maps"], env=env, capture_output=True,
                              text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return os.path.realpath(path) in maps


def discover(pcmalloc_library, wanted=None):
    """The allocators to run, in ORDER, limited to the names in wanted
    (None: all). Each carries a problem string when it cannot be run."""
    found = []
    for name in ORDER:
        if wanted is not None and name not in wanted:
            continue
        if name == "pcmalloc":
            path = os.path.abspath(pcmalloc_library)
            commit = _git_description(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            allocator = Allocator(name, path, False, commit)
            if not os.path.exists(path):
                allocator.problem = f"{path} not built (run make)"
        elif name == "glibc":
            allocator = Allocator(name, None, True, _package_version("libc6"))
        else:
            soname, package = PEERS[name]
            path = _find_library(soname)
            allocator = Allocator(name, path, True, _package_version(package))
            if path is None:
                allocator.problem = f"{soname} not found (apt-get install {package})"
        if allocator.preload and not allocator.problem and not _preload_takes_effect(allocator.preload):
            allocator.problem = f"LD_PRELOAD={allocator.preload} does not take effect"
        found.append(allocator)
    return found


def _git_description(root):
    """The commit of the tree pcmalloc was built from, and whether it had
    uncommitted changes (a benchmark of a dirty tree should say so)."""
    def git(*args):
        try:
            out = subprocess.run(["git", "-C", root, *args], capture_output=True,
                                 text=True, check=False)
        except OSError:
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown commit"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"commit {commit}" + (" + uncommitted changes" if dirty else "")
