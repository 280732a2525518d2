"""bench/report.py - writes build/bench/results.md: the machine, the
allocators, an at-a-glance table of pcmalloc (and its variants, if any)
against the best peer, pcmalloc against each variant, every failure with
the command that reproduces it, then one table per benchmark (a row per
allocator) with its plot. Also the raw CSV of every run.

Formatting only: every figure comes from aggregate.py, every picture from
plot.py.
"""

import csv
import os
import statistics

import aggregate
from allocators import environment_text

# A median of at least this many voluntary context switches a run, and
# SLEEPS_APART times another allocator's in the same column of a threaded
# benchmark, puts the table of them under its throughput table: an allocator
# whose threads sleep where another's do not (waits every allocator has, as
# larson's barriers at 16 threads, are left out).
SLEEPS_SHOWN = 100
SLEEPS_APART = 4

CSV_FIELDS = ["repetition", "benchmark", "threads", "pinned", "allocator", "status", "metric",
              "value", "unit", "checksum", "maxrss_kb", "wall_s", "sleeps", "args", "detail", "measures"]


class RunLog:
    """runs.csv, written as the runs happen, so an interrupted suite
    still leaves its data behind."""

    def __init__(self, path):
        self.file = open(path, "w", newline="", encoding="utf-8")
        self.writer = csv.DictWriter(self.file, fieldnames=CSV_FIELDS, extrasaction="ignore")
        self.writer.writeheader()

    def add(self, record):
        self.writer.writerow(record)
        self.file.flush()

    def rewrite(self, records):
        """After the checksum check has relabelled some runs."""
        self.file.seek(0)
        self.file.truncate()
        self.writer.writeheader()
        for r in records:
            self.writer.writerow(r)
        self.file.close()


def _number(value):
    """Three significant digits, without exponent for everyday magnitudes."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _value(cell):
    if cell.metric == "time":
        return f"{_number(cell.value)} s"
    return f"{_number(cell.value / 1e6)} M"


# The measures (KiB) that give the resident set at the end of a phase, and
# when each is read.
PHASE_END_KEYS = (("rss_after_free_kb", "at once"), ("rss_after_idle_kb", "after the pause"))


def _mib(kib):
    return f"{kib / 1024:.1f}"


def _ratio(ratio):
    return "" if ratio is None else f"{ratio:.2f}"


def _bold(text, yes):
    return f"**{text}**" if yes and text else text


def _failure(cell):
    failed = f"{cell.failures}/{cell.runs}" if cell.runs > 1 else ""
    return f"**{cell.status.upper()}** {failed}".strip()


def _config_label(threads, pinned):
    return f"{threads} pinned" if pinned else str(threads)


class Report:
    def __init__(self, settings, machine, allocators, benchmarks, tables, best_peer,
                 fastpath, fastpath_ratios, failures, plots, measures=None):
        self.s = settings
        self.machine = machine
        self.allocators = allocators
        self.variants = [a for a in allocators if a.is_variant]
        self.peers = {a.name for a in allocators if a.is_peer}
        self.benchmarks = benchmarks
        self.tables = tables
        self.best_peer = best_peer
        self.fastpath = fastpath
        self.fastpath_ratios = fastpath_ratios
        self.failures = failures
        self.plots = plots  # names of the PNGs that were drawn
        self.measures = measures or {}  # (benchmark, allocator) -> {key: median}
        self.lines = []

    def _out(self, *lines):
        self.lines.extend(lines)

    def _image(self, name, alt):
        if name in self.plots:
            self._out(f"![{alt}]({name}.png)", "")

    def write(self, path):
        self._header()
        self._glance()
        self._versus()
        self._failures()
        for number, benchmark in enumerate(self.benchmarks, 1):
            if benchmark.threaded:
                self._threaded(number, benchmark)
            else:
                self._single(number, benchmark)
        if self.fastpath:
            self._fastpath(len(self.benchmarks) + 1)
        self._how_to_read()
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.lines) + "\n")

    # ---- sections ------------------------------------------------------

    def _header(self):
        s = self.s
        mode = "quick run (BENCH_QUICK=1: reduced sizes)" if s.quick else "full run"
        self._out(
            "# pcmalloc benchmark results", "",
            f"{mode}; {s.repetitions} repetition{'s' if s.repetitions > 1 else ''}, the "
            "allocators interleaved within each; every figure is the median of the "
            f"repetitions. Total time {s.elapsed_s / 60:.1f} min.", "",
            "Ratios compare each allocator with the **best peer** of the same run (the best of "
            + ", ".join(a.name for a in self.allocators if a.is_peer) + "): below 1.00 is "
            "faster (or, for peak RSS, smaller) than every peer. **Bold**: the best in its column.",
            "")
        cpus = os.cpu_count() or 1
        # The suite itself keeps about one CPU busy; a load well above that
        # means other work shared the machine.
        if max(s.load_start, s.load_end) > 1.5 + 0.25 * cpus:
            self._out(f"⚠ **The machine was busy**: load average {s.load_start:.1f} at the start "
                      f"and {s.load_end:.1f} at the end, on {cpus} CPUs. Other processes "
                      "competed for the CPUs, so scaling across threads is understated and the "
                      "noise is high; the ratios, taken between allocators run back to back, "
                      "hold up better than the absolute figures.", "")
        self._out("## Machine", "", "| | |", "|---|---|")
        for what, value in self.machine:
            self._out(f"| {what} | {value} |")
        self._out("", "## Allocators", "", "| allocator | LD_PRELOAD | environment | version |",
                  "|---|---|---|---|")
        for a in self.allocators:
            library = f"`{a.preload}`" if a.preload else "(none: the C library's malloc)"
            env = f"`{environment_text(a)}`" if a.env else ""
            # A commit subject (a variant's version) may hold a table's "|".
            self._out(f"| {a.name} | {library} | {env} | {a.version.replace('|', '/')} |")
        for a in self.s.skipped_allocators:
            self._out(f"| {a.name} | not run: {a.problem} | {environment_text(a)} | {a.version} |")
        self._out("")
        if self.variants:
            self._out("**Variants** of pcmalloc (`BENCH_VARIANTS`), run interleaved with the "
                      "others: " + "; ".join(_variant_text(v) for v in self.variants) + ". "
                      "They are not peers: the best peer is never a variant, and a variant's "
                      "ratios are to the same best peer as pcmalloc's.", "")

    def _glance(self):
        self._out("## At a glance: pcmalloc "
                  + ("and its variants " if self.variants else "") + "against the best peer", "")
        if "pcmalloc" not in {a.name for a in self.allocators}:
            self._out("pcmalloc was not part of this run.", "")
            return
        self._image("summary", "pcmalloc against the best peer")
        variant_heads = "".join(f"{v.name} time vs best peer | " for v in self.variants)
        self._out("| benchmark | threads | pcmalloc | best peer | time vs best peer | "
                  + variant_heads + "peak RSS vs best peer |",
                  "|---|---|---|---|---|---|" + "---|" * len(self.variants))
        wins = close = losses = total = 0
        tied_wins = tied_losses = 0
        rss_above = rss_tied = 0
        least_of_preloaded = preloaded_columns = 0
        for benchmark in self.benchmarks:
            for key in self.s.configs(benchmark):
                column = self.tables.get((benchmark.name, *key), {})
                mine = column.get("pcmalloc")
                if mine is None:
                    continue
                peer = self.best_peer(column)
                peer_text = f"{peer} {_value(column[peer])}" if peer else "-"
                if mine.ok:
                    total += 1
                    ratio = mine.time_ratio
                    wins += ratio is not None and ratio <= 1.0
                    close += ratio is not None and 1.0 < ratio <= 1.1
                    losses += ratio is not None and ratio > 2.0
                    tied = ratio is not None and peer is not None and aggregate.overlap(mine, column[peer])
                    tied_wins += tied and ratio <= 1.0
                    tied_losses += tied and ratio > 1.0
                    flag = (" ≈" if tied else "") + (" ⚠" if ratio is not None and ratio > 2.0 else "")
                    smallest = aggregate.smallest_peer(column, self.allocators)
                    rss_tie = smallest is not None and aggregate.rss_overlap(mine, smallest)
                    above = mine.rss_ratio is not None and mine.rss_ratio > 1.0
                    rss_above += above
                    rss_tied += above and rss_tie
                    preloaded = aggregate.smallest_peer(column, self.allocators, preloaded=True)
                    preloaded_columns += preloaded is not None
                    least_of_preloaded += preloaded is not None and mine.rss_kb <= preloaded.rss_kb
                    self._out(f"| {benchmark.name} | {_config_label(*key) if benchmark.threaded else '-'} "
                              f"| {_value(mine)} | {peer_text} | {_ratio(ratio)}{flag} "
                              f"| {self._variant_cells(column)}{_ratio(mine.rss_ratio)}"
                              f"{' ≈' if rss_tie else ''} |")
                else:
                    self._out(f"| {benchmark.name} | {_config_label(*key) if benchmark.threaded else '-'} "
                              f"| {_failure(mine)} | {peer_text} | | "
                              f"{self._variant_cells(column)}|")
        for size, row in self.fastpath.items():
            mine = row.get("pcmalloc")
            if not mine:
                continue
            ratios = self.fastpath_ratios.get(size, {})
            peers = [(n, c) for n, c in row.items() if n in self.peers and c.ok]
            best = min(peers, key=lambda nc: nc[1].per_pair) if peers else None
            peer_text = f"{best[0]} {best[1].per_pair:.0f} instr" if best else "-"
            value = f"{mine.per_pair:.0f} instr" if mine.ok else "**FAIL**"
            variant_cells = "".join(
                ("**FAIL** | " if row.get(v.name) and not row[v.name].ok
                 else f"{_ratio(ratios.get(v.name))} | ") for v in self.variants)
            self._out(f"| fastpath (callgrind) | size {_size_label(size)} | {value} | {peer_text} "
                      f"| {_ratio(ratios.get('pcmalloc'))} | {variant_cells}|")
        self._out("", f"pcmalloc is at least as fast as the best peer in {wins} of {total} "
                  f"timed columns, within 10% in {close} more, and more than twice as slow in "
                  f"{losses} (marked ⚠). In {tied_wins + tied_losses} columns (marked ≈: "
                  f"{tied_wins} of the first kind, {tied_losses} slower) the runs of pcmalloc and "
                  f"of the best peer overlap, so this machine's noise could reverse their order. "
                  f"Its peak RSS is above the smallest peer's in {rss_above} columns, in {rss_tied} "
                  f"of them (≈) within the overlap of their runs. Of the allocators loaded with "
                  f"LD_PRELOAD (every peer but glibc, whose malloc comes with the C library that "
                  f"every program maps anyway), it had the least peak RSS in {least_of_preloaded} "
                  f"of {preloaded_columns} columns.", "")
        self._phase_ends()

    def _phase_ends(self):
        """pcmalloc's resident set once a program freed what its phase allocated
        (its measures' rss_after_* keys), against the smallest peer's."""
        rows = []
        for benchmark in self.benchmarks:
            mine = self.measures.get((benchmark.name, "pcmalloc"), {})
            if not all(key in mine for key, _ in PHASE_END_KEYS):
                continue
            cells = []
            for key, _ in PHASE_END_KEYS:
                peers = [(a.name, self.measures[(benchmark.name, a.name)][key]) for a in self.allocators
                         if a.is_peer and key in self.measures.get((benchmark.name, a.name), {})]
                least = min(peers, key=lambda peer: peer[1]) if peers else None
                ratio = mine[key] / least[1] if least and least[1] > 0 else None
                cells.append(f"{_mib(mine[key])} | "
                             + (f"{least[0]} {_mib(least[1])} | {_ratio(ratio) or '-'}" if least else "- | -"))
            rows.append(f"| {benchmark.name} | " + " | ".join(cells) + " |")
        if not rows:
            return
        heads = " | ".join(f"pcmalloc {when} | smallest peer | vs smallest" for _, when in PHASE_END_KEYS)
        self._out("The resident set once a phase has freed what it allocated (MiB above the program's "
                  "own; the programs' measures, medians): at once, and after the program's pause and "
                  "a short burst of calls, in which an allocator that gives memory back after a delay "
                  "has had its chance.", "",
                  f"| benchmark | {heads} |", "|---|" + "---|" * 3 * len(PHASE_END_KEYS), *rows, "")

    def _variant_cells(self, column):
        """The glance table's cells of the variants, each ending in " | "."""
        cells = []
        for v in self.variants:
            cell = column.get(v.name)
            if cell is None:
                cells.append("")
            elif not cell.ok:
                cells.append(_failure(cell))
            else:
                cells.append(_ratio(cell.time_ratio))
        return "".join(f"{c} | " for c in cells)

    def _versus(self):
        """pcmalloc's time over each variant's, summarised over every timed
        column: the before/after verdict, free of the peers' noise."""
        if not self.variants or "pcmalloc" not in {a.name for a in self.allocators}:
            return
        self._out("## pcmalloc against its variants", "",
                  "pcmalloc's time divided by the variant's, per timed column (benchmark and "
                  "thread setting) where both ran cleanly: below 1.00 pcmalloc is faster. "
                  "Differences within 5% are noise on a shared machine.", "",
                  "| variant | columns | median | min | max | pcmalloc faster by >5% "
                  "| within 5% | pcmalloc slower by >5% |", "|---|---|---|---|---|---|---|---|")
        for v in self.variants:
            ratios = aggregate.versus(self.tables, "pcmalloc", v.name)
            if not ratios:
                self._out(f"| {v.name} | 0 | | | | | | |")
                continue
            faster = sum(r < 0.95 for r in ratios)
            slower = sum(r > 1.05 for r in ratios)
            self._out(f"| {v.name} | {len(ratios)} | {statistics.median(ratios):.2f} "
                      f"| {min(ratios):.2f} | {max(ratios):.2f} | {faster} "
                      f"| {len(ratios) - faster - slower} | {slower} |")
        self._out("")

    def _failures(self):
        self._out("## Failures", "")
        if not self.failures:
            self._out("None: every run exited cleanly with the expected checksum.", "")
            return
        self._out("Each line: allocator, benchmark, setting, repetition, what happened, and "
                  "the command that reproduces it.", "")
        for f in self.failures:
            self._out(f"- **{f['allocator']}** {f['benchmark']} "
                      f"({_config_label(f['threads'], f['pinned'])} thr), repetition "
                      f"{f['repetition']}: {f['status']} — {f['detail']}  ", f"  `{f['command']}`")
        self._out("")

    def _single(self, number, benchmark):
        column = self.tables.get((benchmark.name, 1, False), {})
        args = " ".join(self.s.argv(benchmark, 1))
        self._out(f"## {number}. {benchmark.name} — {benchmark.title}", "", benchmark.about, "",
                  f"Arguments: `{args}`", "",
                  "| allocator | time (s) | vs best peer | peak RSS (MiB) | vs best peer | spread |",
                  "|---|---|---|---|---|---|")
        for a in self.allocators:
            cell = column.get(a.name)
            if cell is None:
                continue
            if not cell.ok:
                self._out(f"| {a.name} | {_failure(cell)} | | | | |")
                continue
            self._out(f"| {a.name} | {_bold(_number(cell.value), cell.best_time)} "
                      f"| {_ratio(cell.time_ratio)} "
                      f"| {_bold(f'{cell.rss_kb / 1024:.1f}', cell.best_rss)} "
                      f"| {_ratio(cell.rss_ratio)} | {cell.spread * 100:.0f}% |")
        self._out("")
        self._measures(benchmark)
        self._image(benchmark.name, benchmark.title)

    def _measures(self, benchmark, which=""):
        """The program's own measures (medians over repetitions), if it prints any;
        `which` names the runs they come from (aggregate.measures keeps the
        1-thread runs of a threaded benchmark)."""
        rows = [(a.name, self.measures[(benchmark.name, a.name)]) for a in self.allocators
                if (benchmark.name, a.name) in self.measures]
        if not rows:
            return
        keys = list(rows[0][1])
        self._out(f"The program's own measures ({which}median of the repetitions; see the program's banner):", "",
                  "| allocator | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys))
        for name, values in rows:
            self._out(f"| {name} | " + " | ".join(_number(values[k]) if k in values else "" for k in keys) + " |")
        self._out("")

    def _threaded(self, number, benchmark):
        keys = self.s.configs(benchmark)
        unit = next((c.unit for key in keys
                     for c in self.tables.get((benchmark.name, *key), {}).values() if c.ok),
                    "ops/s")
        largest = max((k for k in keys if not k[1]), default=keys[-1])
        args = " ".join(self.s.argv(benchmark, "T"))
        self._out(f"## {number}. {benchmark.name} — {benchmark.title}", "", benchmark.about, "",
                  f"Arguments: `{args}`; the pinned run puts all "
                  f"{self.s.pinned_threads} threads on CPU 0 (as `taskset -c 0` would).", "",
                  f"Throughput in million {unit} (ratio to the best peer: below 1.00 is faster), "
                  f"by thread count:", "",
                  "| allocator | " + " | ".join(_config_label(*k) for k in keys)
                  + f" | peak RSS at {largest[0]} thr (MiB) |",
                  "|---|" + "---|" * (len(keys) + 1))
        for a in self.allocators:
            cells = []
            for key in keys:
                cell = self.tables.get((benchmark.name, *key), {}).get(a.name)
                if cell is None:
                    cells.append("")
                elif not cell.ok:
                    cells.append(_failure(cell))
                else:
                    text = _bold(_number(cell.value / 1e6), cell.best_time)
                    cells.append(f"{text} ({_ratio(cell.time_ratio)})" if cell.time_ratio
                                 else text)
            big = self.tables.get((benchmark.name, *largest), {}).get(a.name)
            rss = ""
            if big is not None and big.ok:
                rss = _bold(f"{big.rss_kb / 1024:.1f}", big.best_rss)
                rss += f" ({_ratio(big.rss_ratio)})" if big.rss_ratio else ""
            if any(cells):
                self._out(f"| {a.name} | " + " | ".join(cells) + f" | {rss} |")
        self._out("")
        self._sleeps(benchmark, keys)
        self._measures(benchmark, "the 1-thread runs, ")
        self._image(benchmark.name, benchmark.title)

    def _sleeps(self, benchmark, keys):
        """Voluntary context switches a run by thread setting, where one
        allocator's threads slept far more than another's (SLEEPS_SHOWN,
        SLEEPS_APART): a thread waiting on a lock (or, in xmalloc, for its
        queue) sleeps, and while it does the others run alone, which in a
        benchmark whose threads contend for a structure of their own (lifo's
        stack) is faster than running together."""
        columns = [self.tables.get((benchmark.name, *key), {}) for key in keys]

        def apart(column):
            medians = [c.sleeps for c in column.values() if c.ok]
            return medians and max(medians) >= SLEEPS_SHOWN and max(medians) >= SLEEPS_APART * min(medians)
        if not any(apart(column) for column in columns):
            return
        self._out("Voluntary context switches a run (median): each is a thread that slept, waiting "
                  "on a lock or for work; meanwhile the others ran alone:", "",
                  "| allocator | " + " | ".join(_config_label(*k) for k in keys) + " |",
                  "|---|" + "---|" * len(keys))
        for a in self.allocators:
            cells = [f"{c.sleeps:.0f}" if c is not None and c.ok else ""
                     for c in (column.get(a.name) for column in columns)]
            if any(cells):
                self._out(f"| {a.name} | " + " | ".join(cells) + " |")
        self._out("")

    def _fastpath(self, number):
        sizes = list(self.fastpath)
        self._out(f"## {number}. fastpath — instructions per malloc+free pair (callgrind)", "",
                  "`valgrind --tool=callgrind --toggle-collect=measured_pairs` over "
                  f"`{' '.join(self.s.fastpath_args)}` pairs of malloc and free after a warm-up; "
                  "the count of the same loop calling two empty functions (the loop's own cost: "
                  f"{self.s.fastpath_overhead:.1f} instructions per pair) is subtracted. "
                  "Instruction counts repeat exactly from run to run. Ratio to the best peer in "
                  "parentheses. Under valgrind glibc cannot use restartable sequences, so "
                  "`sched_getcpu()` takes its system-call path; the last column shows what "
                  "that cost an allocator that calls it on every malloc and free (natively it "
                  "is a few loads).", "",
                  "| allocator | " + " | ".join(_size_label(s) for s in sizes)
                  + " | of which sched_getcpu (first column) |",
                  "|---|" + "---|" * (len(sizes) + 1))
        for a in self.allocators:
            cells = []
            for size in sizes:
                count = self.fastpath[size].get(a.name)
                if count is None:
                    cells.append("")
                elif not count.ok:
                    cells.append("**FAIL**")
                else:
                    ratio = self.fastpath_ratios[size].get(a.name)
                    cells.append(f"{count.per_pair:.0f}" + (f" ({ratio:.2f})" if ratio else ""))
            first = self.fastpath[sizes[0]].get(a.name)
            getcpu = f"{first.getcpu_per_pair:.0f}" if first is not None and first.ok else ""
            self._out(f"| {a.name} | " + " | ".join(cells) + f" | {getcpu} |")
        failed = [(s, n, c.detail) for s in sizes for n, c in self.fastpath[s].items() if not c.ok]
        if failed:
            self._out("")
            for size, name, detail in failed:
                self._out(f"- {name}, size {_size_label(size)}: {detail}")
        self._out("")
        self._image("fastpath", "instructions per malloc+free pair")

    def _how_to_read(self):
        self._out(
            "## How to read this", "",
            "- Each benchmark is a program in `bench/` run with the allocator brought in by "
            "`LD_PRELOAD` (glibc: no preload). It prints one result line with a checksum; a run "
            "whose checksum differs from glibc's for the same arguments, that crashes, reports a "
            "corrupt object, or exceeds the time limit is marked in its cell and listed under "
            "Failures, and takes no part in the ratios.",
            "- Threaded programs split a fixed amount of work between their threads; on a "
            "machine with N CPUs throughput can grow up to N threads and should stay flat "
            "beyond (oversubscription). The pinned run puts every thread on CPU 0.",
            "- Peak RSS is the kernel's maximum resident set size of the process (wait4's "
            "rusage), benchmark data included: compare allocators, not absolute values.",
            "- `spread` is (max - min) / median over the repetitions: the noise of this machine.",
            "- Voluntary context switches (wait4's rusage), tabled under a threaded benchmark "
            f"where an allocator's median reached {SLEEPS_SHOWN} a run and {SLEEPS_APART} times "
            "another's in the same column: each is a thread that "
            "slept on a lock or waiting for work. Where threads contend for one structure of the "
            "benchmark's own (lifo's stack), an allocator whose locks put them to sleep lets the "
            "others run alone, which is faster than running together: a win there can be a "
            "convoy, not speed.",
            "- ≈ beside a ratio at a glance: the runs of pcmalloc and of the best peer overlap (the "
            "range from each one's slowest run to its fastest meets the other's), so a rerun could "
            "put them in the other order; the ratio of medians alone does not show that. Beside "
            "a peak RSS ratio: the same for the peak RSS of pcmalloc's runs and of the peer with "
            "the smallest.",
            "- Variants (`BENCH_VARIANTS`) are other builds or settings of pcmalloc, run "
            "interleaved like every allocator. Their ratios are to the best *peer*, like "
            "pcmalloc's, so pcmalloc's and a variant's ratios in one column compare directly; "
            "\"pcmalloc against its variants\" divides them.",
            "- Raw data: `runs.csv` (every run); plot data and gnuplot scripts: `plots/`.",
            "- Reproduce one cell: `LD_PRELOAD=<library> build/bench/bin/<program> <arguments>`.",
            "")


def _variant_text(variant):
    env = environment_text(variant)
    return f"**{variant.name}** `{variant.preload}`" + (f" with `{env}`" if env else "")


def _size_label(size):
    return "16..512 mixed" if size == 0 else f"{size} B"
