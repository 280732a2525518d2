#!/usr/bin/env python3
"""bench/run.py - the benchmark runner behind `make bench`.

    python3 bench/run.py LIBPCMALLOC.so [OUT_DIR]

Builds the programs of bench/ with the host gcc into OUT_DIR/bin (not
linked to pcmalloc: every allocator comes in by LD_PRELOAD), runs every
benchmark under every allocator, interleaved within each repetition, then
the callgrind fast-path count, and writes OUT_DIR/results.md, the PNG
plots beside it and OUT_DIR/runs.csv.

Environment knobs:
  BENCH_QUICK=1              1 repetition at reduced sizes: a smoke test
  BENCH_REPS=n               repetitions (default 3; quick: 1)
  BENCH_ALLOCATORS=a,b       only these (pcmalloc glibc jemalloc tcmalloc mimalloc)
  BENCH_VARIANTS=v,w         extra rows of the library under test, each
                             name=LIBRARY.so[:VAR=VALUE...]: preloaded like
                             the others, VAR=VALUE set for its own runs only;
                             never a peer (see bench/README.md)
  BENCH_ONLY=x,y             only these benchmarks (names as in bench/suite.py,
                             and fastpath for the callgrind count)
  BENCH_THREADS="1 2 4"      thread counts of the threaded benchmarks
  BENCH_PINNED_THREADS=n     threads of the run pinned to CPU 0 (default 4; 0: none)
  BENCH_SCALE=x              multiply each benchmark's work size by x
  BENCH_TIMEOUT=s            limit for one run (default 120 s; quick: 60 s)
  BENCH_STRICT=1             exit 1 when any run failed
  BENCH_PCMALLOC_CALLGRIND=f pcmalloc's callgrind count with library f instead: a
                             build with -DPCM_RSEQ_SIMULATION, which under valgrind
                             (no rseq there) runs the rseq fast path as CPU 0, so
                             the count is that path's (make bench passes one)
  BENCH_CALLGRIND_LIBRARIES=name=f,...  the same for any allocator or variant
                             (make bench-compare passes pcmalloc-before's)

It never stops for a failing allocator: a crash, hang, corrupt object or
wrong checksum is recorded in its cell and listed in the report. It exits
non-zero only when it cannot run at all (no compiler, a program that does
not build), or under BENCH_STRICT=1 after a failure.
"""

import os
import shlex
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__

import aggregate  # noqa: E402
import allocators as allocator_discovery  # noqa: E402
import callgrind  # noqa: E402
import machine  # noqa: E402
import measure  # noqa: E402
import plot  # noqa: E402
import report  # noqa: E402
import suite  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
CFLAGS = ["-std=c11", "-O2", "-g", "-pthread", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror"]
# The C++ program (cxx_containers.cpp): sized deallocation is g++'s default.
CXXFLAGS = ["-std=c++17", *CFLAGS[1:]]


class Settings:
    """What this run does, from the environment."""

    def __init__(self):
        env = os.environ
        self.quick = env.get("BENCH_QUICK", "0") not in ("", "0")
        self.repetitions = int(env.get("BENCH_REPS", "1" if self.quick else "3"))
        self.thread_counts = [int(t) for t in env.get(
            "BENCH_THREADS", " ".join(map(str, suite.THREAD_COUNTS))).replace(",", " ").split()]
        self.pinned_threads = int(env.get("BENCH_PINNED_THREADS", str(suite.PINNED_THREADS)))
        self.scale = float(env.get("BENCH_SCALE", "1"))
        self.timeout_s = float(env.get("BENCH_TIMEOUT", "60" if self.quick else "120"))
        self.strict = env.get("BENCH_STRICT", "0") not in ("", "0")
        # allocator or variant name -> the library its callgrind count preloads
        self.callgrind_libraries = {}
        for entry in _list(env.get("BENCH_CALLGRIND_LIBRARIES")) or []:
            name, equals, library = entry.partition("=")
            if not equals or not name.strip() or not library.strip():
                sys.exit(f"bench: BENCH_CALLGRIND_LIBRARIES: {entry!r} is not name=LIBRARY.so")
            self.callgrind_libraries[name.strip()] = library.strip()
        if env.get("BENCH_PCMALLOC_CALLGRIND"):
            self.callgrind_libraries["pcmalloc"] = env["BENCH_PCMALLOC_CALLGRIND"]
        self.wanted_allocators = _list(env.get("BENCH_ALLOCATORS"))
        self.only = _list(env.get("BENCH_ONLY"))
        try:
            self.variants = allocator_discovery.parse_variants(env.get("BENCH_VARIANTS"))
        except ValueError as error:
            sys.exit(f"bench: BENCH_VARIANTS: {error}")
        self.fastpath_sizes = suite.FASTPATH_QUICK_SIZES if self.quick else suite.FASTPATH_SIZES
        fastpath = suite.FASTPATH_QUICK_ARGS if self.quick else suite.FASTPATH_ARGS
        self.fastpath_args = [f"{k}={v}" for k, v in fastpath.items()]
        self.fastpath_overhead = 0.0
        self.elapsed_s = 0.0
        self.load_start = os.getloadavg()[0]
        self.load_end = self.load_start
        self.skipped_allocators = []
        if self.only:
            unknown = set(self.only) - set(suite.NAMES)
            if unknown:
                sys.exit(f"bench: BENCH_ONLY names unknown benchmarks {sorted(unknown)}; "
                         f"known: {' '.join(suite.NAMES)}")
        if self.wanted_allocators:
            unknown = set(self.wanted_allocators) - set(allocator_discovery.ORDER)
            if unknown:
                sys.exit(f"bench: BENCH_ALLOCATORS names unknown allocators {sorted(unknown)}; "
                         f"known: {' '.join(allocator_discovery.ORDER)}")

    def benchmarks(self):
        return [b for b in suite.BENCHMARKS if not self.only or b.name in self.only]

    def configs(self, benchmark):
        pinned = self.pinned_threads if self.pinned_threads > 0 else None
        settings = suite.configs(benchmark, self.thread_counts, pinned or 0)
        return [c for c in settings if pinned or not c[1]]

    def argv(self, benchmark, threads):
        return suite.argv(benchmark, self.quick, threads, self.scale)


def _list(value):
    if not value:
        return None
    return [v for v in value.replace(",", " ").split() if v]


def build(out_dir):
    """Compiles every program; exits on a compile error (a bug of ours)."""
    bin_dir = os.path.join(out_dir, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    for program in suite.PROGRAMS + ["spawn"]:
        source = os.path.join(BENCH_DIR, program + ".c")
        compiler = ["gcc", *CFLAGS]
        if not os.path.exists(source):
            source = os.path.join(BENCH_DIR, program + ".cpp")
            compiler = ["g++", *CXXFLAGS]
        target = os.path.join(bin_dir, program)
        done = subprocess.run([*compiler, "-o", target, source], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"bench: {source} does not build:\n{done.stderr}")
    return bin_dir


def _record(repetition, benchmark, threads, pinned, allocator, args, outcome):
    return {
        "repetition": repetition, "benchmark": benchmark.name, "threads": threads,
        "pinned": pinned, "allocator": allocator.name, "status": outcome.status,
        "metric": outcome.metric, "value": outcome.value, "unit": outcome.unit,
        "checksum": outcome.checksum, "maxrss_kb": outcome.maxrss_kb,
        "wall_s": round(outcome.wall_s, 4), "sleeps": outcome.sleeps, "args": " ".join(args),
        "detail": outcome.detail, "measures": outcome.measures,
    }


def _short(outcome):
    if not outcome.ok:
        return outcome.status.upper()
    if outcome.metric == "time":
        return f"{outcome.value:.3g}s"
    return f"{outcome.value / 1e6:.3g}M"


def run_suite(settings, bin_dir, allocators, log):
    """Every benchmark x setting x allocator, settings.repetitions times.
    The allocator order rotates from one repetition to the next, and all
    allocators of one cell run back to back, so they share the machine's
    mood of the moment. A cell that timed out is not retried."""
    records = []
    timed_out = set()
    spawn = os.path.join(bin_dir, "spawn")
    plan = [(b, key) for b in settings.benchmarks() for key in settings.configs(b)]
    for repetition in range(1, settings.repetitions + 1):
        shift = (repetition - 1) % len(allocators)
        order = allocators[shift:] + allocators[:shift]
        for benchmark, (threads, pinned) in plan:
            args = settings.argv(benchmark, threads)
            shown = []
            for allocator in order:
                cell = (benchmark.name, threads, pinned, allocator.name)
                if cell in timed_out:
                    continue
                argv = [os.path.join(bin_dir, benchmark.program)] + args
                outcome = measure.run(spawn, argv, allocator.preload, settings.timeout_s,
                                      pin_cpu=0 if pinned else None, extra_env=allocator.env)
                if outcome.status == "timeout":
                    timed_out.add(cell)
                record = _record(repetition, benchmark, threads, pinned, allocator, args, outcome)
                records.append(record)
                log.add(record)
                shown.append(f"{allocator.name} {_short(outcome)}")
            label = suite.config_label(benchmark, threads, pinned)
            print(f"[{repetition}/{settings.repetitions}] {benchmark.name:<20} "
                  f"{label:>9}  " + "  ".join(shown), flush=True)
    return records


def run_fastpath(settings, bin_dir, allocators):
    """{size: {allocator: callgrind.Count}}, or {} without valgrind."""
    if settings.only and "fastpath" not in settings.only:
        return {}
    if subprocess.run(["sh", "-c", "command -v valgrind"], capture_output=True).returncode:
        print("bench: valgrind not found; skipping the fast-path count", flush=True)
        return {}
    binary = os.path.join(bin_dir, "fastpath")
    overhead, error = callgrind.loop_overhead(binary, 0, settings.fastpath_args)
    if overhead is None:
        print(f"bench: fast-path loop overhead: {error}; skipping", flush=True)
        return {}
    settings.fastpath_overhead = overhead
    counts = {}
    for size in settings.fastpath_sizes:
        counts[size] = {}
        for allocator in allocators:
            preload = allocator.preload
            if allocator.name in settings.callgrind_libraries:
                preload = os.path.abspath(settings.callgrind_libraries[allocator.name])
            counts[size][allocator.name] = callgrind.measure(
                binary, preload, size, settings.fastpath_args, overhead,
                extra_env=allocator.env)
        print(f"[callgrind] fastpath size={size:<4} " + "  ".join(
            f"{n} {c.per_pair:.0f}" if c.ok else f"{n} FAIL"
            for n, c in counts[size].items()), flush=True)
    return counts


def failures_of(records, bin_dir, allocators):
    by_name = {a.name: a for a in allocators}
    found = []
    for r in records:
        if r["status"] == "ok":
            continue
        program = next(b.program for b in suite.BENCHMARKS if b.name == r["benchmark"])
        found.append(dict(r, command=reproduce(by_name[r["allocator"]], r["pinned"],
                                               os.path.join(bin_dir, program), r["args"])))
    return found


def reproduce(allocator, pinned, program, args):
    """The shell command that repeats one run, a variant's variables included."""
    words = [f"{k}={shlex.quote(v)}" for k, v in allocator.env.items()]
    if allocator.preload:
        words.append(f"LD_PRELOAD={shlex.quote(allocator.preload)}")
    if pinned:
        words.append("taskset -c 0")
    return " ".join(words + [shlex.quote(program), args])


def with_variants(found, variants):
    """The allocators in display order: pcmalloc, then its variants (so that
    before and after sit next to each other), then the peers."""
    mine = [a for a in found if not a.is_peer]
    return mine + variants + [a for a in found if a.is_peer]


def draw(settings, plotter, tables, allocators, fastpath, fastpath_ratios, best_peer):
    subtitle = (f"{os.cpu_count()} CPUs; median of {settings.repetitions} run"
                f"{'s' if settings.repetitions > 1 else ''}"
                + ("; QUICK sizes" if settings.quick else ""))
    drawn = set()
    groups, rss_groups = [], []
    variants = [a for a in allocators if a.is_variant]
    for benchmark in settings.benchmarks():
        keys = settings.configs(benchmark)
        title = f"{benchmark.name}: {benchmark.title}"
        if benchmark.threaded:
            columns = {k: tables.get((benchmark.name, *k), {}) for k in keys}
            unit = next((c.unit for col in columns.values() for c in col.values() if c.ok),
                        "ops/s")
            ok = plotter.threads(benchmark.name, title, columns, keys, allocators, unit,
                                 subtitle + "; higher is better")
            largest = max((k for k in keys if not k[1]), default=keys[-1])
            mine = columns[largest].get("pcmalloc")
        else:
            column = tables.get((benchmark.name, 1, False), {})
            ok = plotter.bars(benchmark.name, title, column, allocators, subtitle)
            mine = column.get("pcmalloc")
        if ok:
            drawn.add(benchmark.name)
        bars = []
        for i, key in enumerate(keys):
            column = tables.get((benchmark.name, *key), {})
            config = 0 if not benchmark.threaded else i
            bars.append((config, _time_ratio(column.get("pcmalloc")),
                         {v.name: _time_ratio(column.get(v.name)) for v in variants}))
        groups.append((benchmark.name, bars))
        rss_groups.append((benchmark.name, mine.rss_ratio if mine and mine.ok else None))
    names = [f"{t}" for t in settings.thread_counts]
    if settings.pinned_threads > 0:
        names.append(f"{settings.pinned_threads} pinned")
    names[0] += " (or single-threaded)"
    if fastpath:
        names.append("callgrind instructions")
    for size, ratios in fastpath_ratios.items():
        groups.append((f"fastpath {'mixed' if size == 0 else size}",
                       [(len(names) - 1, ratios.get("pcmalloc"),
                         {v.name: ratios.get(v.name) for v in variants})]))
    if fastpath:
        if plotter.fastpath("fastpath", fastpath, list(fastpath), allocators):
            drawn.add("fastpath")
    if "pcmalloc" in {a.name for a in allocators}:
        if plotter.summary("summary", groups, names, rss_groups, subtitle, variants):
            drawn.add("summary")
    return drawn


def _time_ratio(cell):
    return cell.time_ratio if cell is not None and cell.ok else None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[1])
    library = sys.argv[1]
    out_dir = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else "build/bench")
    settings = Settings()
    began = time.monotonic()
    os.makedirs(out_dir, exist_ok=True)

    machine_description = machine.describe()
    bin_dir = build(out_dir)
    found = with_variants(allocator_discovery.discover(library, settings.wanted_allocators),
                          allocator_discovery.variant_allocators(settings.variants))
    allocators = [a for a in found if not a.problem]
    settings.skipped_allocators = [a for a in found if a.problem]
    for a in settings.skipped_allocators:
        print(f"bench: skipping {a.name}: {a.problem}", flush=True)
    if not allocators:
        sys.exit("bench: no allocator can be run")
    print(f"bench: {'quick' if settings.quick else 'full'} run, {settings.repetitions} "
          f"repetition(s), allocators: {' '.join(a.name for a in allocators)}", flush=True)
    for a in allocators:
        if a.is_variant:
            print(f"bench: variant {a.name}: LD_PRELOAD={a.preload} "
                  f"{allocator_discovery.environment_text(a)}".rstrip(), flush=True)

    log = report.RunLog(os.path.join(out_dir, "runs.csv"))
    records = run_suite(settings, bin_dir, allocators, log)
    aggregate.mark_bad_checksums(records)
    log.rewrite(records)
    fastpath = run_fastpath(settings, bin_dir, allocators)

    tables = aggregate.tables(records, allocators)
    fastpath_ratios = aggregate.fastpath_ratios(fastpath, allocators)

    def best_peer(column):
        return aggregate.best_peer(column, allocators)

    plotter = plot.Plotter(out_dir)
    drawn = draw(settings, plotter, tables, allocators, fastpath, fastpath_ratios, best_peer)
    for error in plotter.errors:
        print(f"bench: plot {error}", flush=True)
    if not plotter.available:
        print("bench: gnuplot not found; results.md has no plots", flush=True)

    failures = failures_of(records, bin_dir, allocators)
    settings.elapsed_s = time.monotonic() - began
    settings.load_end = os.getloadavg()[0]
    results = os.path.join(out_dir, "results.md")
    report.Report(settings, machine_description, allocators, settings.benchmarks(), tables,
                  best_peer, fastpath, fastpath_ratios, failures, drawn,
                  aggregate.measures(records)).write(results)
    print(f"bench: wrote {results} ({settings.elapsed_s / 60:.1f} min)", flush=True)
    for f in failures:
        print(f"bench: FAILED {f['allocator']} {f['benchmark']} threads={f['threads']}"
              f"{' pinned' if f['pinned'] else ''} rep {f['repetition']}: {f['status']}: "
              f"{f['detail']}", flush=True)
    return 1 if settings.strict and failures else 0


if __name__ == "__main__":
    sys.exit(main())
