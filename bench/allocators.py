"""bench/allocators.py - the allocators a run compares: pcmalloc (the
library under test) and the peers a user would pick instead, each brought
in by LD_PRELOAD (glibc's malloc is what a program gets with no preload).

Finds each peer's shared object where Debian installs it, names the
package and its version for the report, and checks that a preload really
takes effect: a library that the dynamic loader silently skips would make
its rows a second copy of glibc's.

Variants (BENCH_VARIANTS) are further rows of the library under test: another
build of it, or the same build under other PCMALLOC_* settings, so that a
before/after comparison is measured in the same run. They are never peers:
"the best peer" stays the best of the allocators a user would pick instead.

Never installs anything (scripts/bench_deps.sh does) and never runs a
benchmark.
"""

import os
import re
import subprocess
from dataclasses import dataclass, field

# Display order in every table and plot: the library under test first (its
# variants, if any, follow it: bench/run.py's with_variants).
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
    # Variables set for this allocator's runs only (a variant's settings).
    env: dict = field(default_factory=dict)
    is_variant: bool = False


# A variant's name becomes a table row, a plot title and a CSV field: keep it
# to characters none of them treats specially.
_VARIANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_variants(text, base_dir=None):
    """BENCH_VARIANTS -> [(name, absolute library path, {VAR: VALUE})].

    text is comma-separated name=LIBRARY.so[:VAR=VALUE...]; a relative
    library path is taken from base_dir (default: the current directory).
    Raises ValueError naming the first malformed entry: a typo must stop the
    run before its minutes are spent, not quietly drop a row."""
    variants = []
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue  # "a=x.so," or an empty knob
        variants.append(_parse_variant(entry, base_dir))
    names = [name for name, _, _ in variants]
    for name in names:
        if name in ORDER:
            raise ValueError(f"variant {name!r}: the name of an allocator the suite runs anyway")
        if names.count(name) > 1:
            raise ValueError(f"variant {name!r} is given twice")
    return variants


def _parse_variant(entry, base_dir):
    name, equals, spec = entry.partition("=")
    name = name.strip()
    if not equals or not _VARIANT_NAME.match(name):
        raise ValueError(f"{entry!r} is not name=LIBRARY.so[:VAR=VALUE...] with a name of "
                         "letters, digits and _.+-")
    library, *settings = spec.split(":")
    if not library.strip():
        raise ValueError(f"variant {name!r} names no library")
    env = {}
    for setting in settings:
        variable, equals, value = setting.partition("=")
        if not equals or not _VARIABLE_NAME.match(variable):
            raise ValueError(f"variant {name!r}: {setting!r} is not VAR=VALUE")
        if variable in env:
            raise ValueError(f"variant {name!r} sets {variable} twice")
        env[variable] = value
    path = os.path.join(base_dir or os.getcwd(), library.strip())
    return name, os.path.normpath(path), env


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


def _preload_takes_effect(path, extra_env=None):
    """True when a process started with LD_PRELOAD=path (and the
    allocator's own variables) has it mapped."""
    env = dict(os.environ, **(extra_env or {}), LD_PRELOAD=path)
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


def variant_allocators(variants):
    """Allocators for parse_variants' list, in the order given, each with a
    problem string when it cannot be run."""
    found = []
    for name, path, env in variants:
        allocator = Allocator(name, path, False, _variant_version(path), env=env,
                              is_variant=True)
        if not os.path.exists(path):
            allocator.problem = f"{path} does not exist"
        elif not _preload_takes_effect(path, env):
            allocator.problem = f"LD_PRELOAD={path} does not take effect"
        found.append(allocator)
    return found


def _variant_version(path):
    """What LIBRARY.version says, when one lies beside the library (make
    bench-compare writes the commit an old build came from there; a git
    description of the library's directory would name the wrong tree), or
    just "variant"."""
    try:
        with open(path + ".version", encoding="utf-8") as f:
            text = f.readline().strip()
    except OSError:
        text = ""
    return f"variant: {text}" if text else "variant"


def environment_text(allocator):
    """The allocator's own variables as a shell would set them ("" if none)."""
    return " ".join(f"{k}={v}" for k, v in allocator.env.items())


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
