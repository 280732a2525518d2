#!/usr/bin/env python3
"""bench/test_report.py - unit test of the programs' own measures in
results.md: aggregate keeps them from the 1-thread, unpinned runs that went
well, and the report shows them under a threaded benchmark's table (larson's
round times) as under the others', and the resident set at the end of a
phase against the smallest peer's.

    python3 bench/test_report.py      (make bench-quick runs it first)

Standard library only, no benchmark is run, well under a second.
"""

import os
import sys
import unittest
from types import SimpleNamespace

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aggregate  # noqa: E402
import allocators  # noqa: E402
import report  # noqa: E402
import suite  # noqa: E402
import test_support  # noqa: E402

Allocator = allocators.Allocator

ALLOCATORS = [Allocator("pcmalloc", "/new/lib.so", False, "test"),
              Allocator("glibc", None, True, "2.36"),
              Allocator("mimalloc", "/usr/lib/libmimalloc.so.2", True, "2.0")]


def _record(allocator, threads, value, measures, status="ok", pinned=False, repetition=1,
            benchmark="larson", sleeps=5):
    return {"repetition": repetition, "benchmark": benchmark, "threads": threads, "pinned": pinned,
            "allocator": allocator, "status": status, "metric": "throughput", "value": value,
            "unit": "ops/s", "checksum": "0" * 16, "maxrss_kb": 2000, "wall_s": 1.0,
            "sleeps": sleeps, "args": "ops=1", "detail": "", "measures": measures}


def _rounds(fastest, median, slowest):
    return f"fastest_round_ms={fastest} median_round_ms={median} slowest_round_ms={slowest}"


RECORDS = [
    # pcmalloc in two modes over three repetitions: the medians are the middle ones
    _record("pcmalloc", 1, 5.0e7, _rounds(24.5, 25.0, 26.0), repetition=1),
    _record("pcmalloc", 1, 3.0e7, _rounds(30.0, 41.0, 52.0), repetition=2),
    _record("pcmalloc", 1, 4.9e7, _rounds(24.0, 26.0, 27.0), repetition=3),
    _record("mimalloc", 1, 5.7e7, _rounds(22.0, 22.5, 23.0)),
    # neither a 2-thread run, nor a pinned one, nor a failed one counts
    _record("mimalloc", 2, 9.0e7, _rounds(1.0, 1.0, 1.0)),
    _record("glibc", 1, 3.6e7, _rounds(2.0, 2.0, 2.0), pinned=True),
    _record("glibc", 1, 3.6e7, _rounds(3.0, 3.0, 3.0), status="crashed"),
]


class Measures(unittest.TestCase):
    def test_medians_of_the_one_thread_runs_that_went_well(self):
        found = aggregate.measures(RECORDS)
        self.assertEqual(found[("larson", "pcmalloc")],
                         {"fastest_round_ms": 24.5, "median_round_ms": 26.0, "slowest_round_ms": 27.0})
        self.assertEqual(found[("larson", "mimalloc")],
                         {"fastest_round_ms": 22.0, "median_round_ms": 22.5, "slowest_round_ms": 23.0})
        self.assertNotIn(("larson", "glibc"), found)


def _threaded_report(names, records):
    """results.md's text for the threaded benchmarks `names` from `records`."""
    benchmarks = [b for b in suite.BENCHMARKS if b.name in names]
    tables = aggregate.tables(records, ALLOCATORS)
    settings = SimpleNamespace(
        quick=True, repetitions=3, elapsed_s=6.0, load_start=0.0, load_end=0.0,
        skipped_allocators=[], pinned_threads=4, fastpath_args=["pairs=10"],
        fastpath_overhead=1.0, configs=lambda b: [(1, False), (2, False), (1, True)],
        argv=lambda b, t: [f"threads={t}", "ops=1"])
    written = report.Report(settings, [("CPU", "test")], ALLOCATORS, benchmarks, tables,
                            lambda column: aggregate.best_peer(column, ALLOCATORS), {}, {}, [],
                            set(), aggregate.measures(records))
    return test_support.report_text(written)


class ThreadedBenchmarkShowsMeasures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text = _threaded_report({"larson"}, RECORDS)

    def _line(self, start):
        return test_support.one_line(self, self.text, start)

    def test_header_names_the_runs_the_measures_come_from(self):
        self.assertEqual(self._line("The program's own measures"),
                         "The program's own measures (the 1-thread runs, median of the repetitions; "
                         "see the program's banner):")
        self.assertEqual(self._line("| allocator | fastest_round_ms"),
                         "| allocator | fastest_round_ms | median_round_ms | slowest_round_ms |")

    def test_a_row_per_allocator_with_measures(self):
        self.assertEqual(self._line("| pcmalloc | 24"), "| pcmalloc | 24.5 | 26.0 | 27.0 |")
        self.assertEqual(self._line("| mimalloc | 22"), "| mimalloc | 22.0 | 22.5 | 23.0 |")
        self.assertNotIn("| glibc | 2", self.text)

    def test_measures_follow_the_throughput_table(self):
        self.assertLess(self.text.index("Throughput in million"), self.text.index("The program's own measures"))


def _lifo(allocator, threads, sleeps, repetition, pinned=False):
    return _record(allocator, threads, 1e7, "", benchmark="lifo", sleeps=sleeps,
                   repetition=repetition, pinned=pinned)


# glibc's threads sleep on its locks at 2 threads (medians: 5000, 8), the
# others' hardly; a failed run's sleeps are left out like its throughput.
SLEEPY = [_lifo(a, t, s, r) for a, per_thread in
          (("pcmalloc", {1: (4, 5, 6), 2: (5, 7, 6)}), ("glibc", {1: (4, 4, 4), 2: (4000, 5000, 9000)}),
           ("mimalloc", {1: (5, 5, 5), 2: (6, 6, 6)}))
          for t, values in per_thread.items() for r, s in enumerate(values, 1)]
SLEEPY += [_lifo(a, 1, 3, r, pinned=True) for a in ("pcmalloc", "glibc", "mimalloc") for r in (1, 2, 3)]
SLEEPY.append(dict(_lifo("mimalloc", 2, 99999, 4), status="crash"))
# The same with every figure cut to one below the bound, as larson's runs.
QUIET = [dict(r, benchmark="larson", sleeps=min(r["sleeps"], report.SLEEPS_SHOWN - 1)) for r in SLEEPY]


class SleepsTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text = _threaded_report({"lifo"}, SLEEPY)

    def _line(self, start):
        return test_support.one_line(self, self.text, start)

    def test_medians_by_thread_setting_of_the_runs_that_went_well(self):
        self.assertIn("\n| allocator | 1 | 2 | 1 pinned |\n", self.text)
        self.assertEqual(self._line("| glibc | 4 | 5000"), "| glibc | 4 | 5000 | 3 |")
        self.assertEqual(self._line("| pcmalloc | 5 | 6"), "| pcmalloc | 5 | 6 | 3 |")
        # the crashed run fails mimalloc's 2-thread cell: no figure there
        self.assertEqual(self._line("| mimalloc | 5 |"), "| mimalloc | 5 |  | 3 |")

    def test_between_the_throughput_table_and_the_measures(self):
        sleepy_larson = [dict(r, sleeps=500) if r["allocator"] == "pcmalloc" else r for r in RECORDS]
        text = _threaded_report({"larson"}, sleepy_larson)
        sleeps = text.index("Voluntary context switches a run (median)")
        self.assertLess(text.index("Throughput in million"), sleeps)
        self.assertLess(sleeps, text.index("The program's own measures"))

    def test_left_out_where_no_median_reaches_the_bound(self):
        quiet = _threaded_report({"larson"}, QUIET)
        self.assertIn("Throughput in million", quiet)
        self.assertNotIn("Voluntary context switches a run", quiet)

    def test_left_out_where_every_allocator_sleeps_alike(self):
        # as at larson's barriers: glibc's 5000 against the others' 1300 (medians)
        alike = [dict(r, benchmark="larson", sleeps=max(r["sleeps"], 1300)) for r in SLEEPY]
        self.assertNotIn("Voluntary context switches a run", _threaded_report({"larson"}, alike))
        # 1250 would be four times short of 5000: shown
        apart = [dict(r, benchmark="larson", sleeps=max(r["sleeps"], 1250)) for r in SLEEPY]
        self.assertIn("Voluntary context switches a run", _threaded_report({"larson"}, apart))


def _phase(allocator, repetition, after_free, after_idle):
    return _record(allocator, 1, 1.0, f"build_s=0.1 rss_after_free_kb={after_free} "
                   f"rss_after_idle_kb={after_idle}", benchmark="list", repetition=repetition)


# pcmalloc's medians 305000 and 1100 KiB; glibc the smallest peer at once,
# mimalloc after the pause.
PHASES = [_phase("pcmalloc", r, f, i) for r, f, i in ((1, 300000, 1000), (2, 310000, 1200), (3, 305000, 1100))]
PHASES += [_phase("glibc", 1, 290000, 290000), _phase("mimalloc", 1, 300000, 280000)]


class PhaseEndTable(unittest.TestCase):
    def test_against_the_smallest_peer_at_each_reading(self):
        text = _threaded_report({"list"}, PHASES)
        self.assertEqual(test_support.one_line(self, text, "| benchmark | pcmalloc at once"),
                         "| benchmark | pcmalloc at once | smallest peer | vs smallest | "
                         "pcmalloc after the pause | smallest peer | vs smallest |")
        self.assertEqual(test_support.one_line(self, text, "| list | 297"),
                         "| list | 297.9 | glibc 283.2 | 1.05 | 1.1 | mimalloc 273.4 | 0.00 |")
        self.assertLess(text.index("| list | 297"), text.index("## Failures"))

    def test_no_ratio_to_a_peer_at_zero(self):
        zero = PHASES + [_phase("mimalloc", 2, 0, 0), _phase("mimalloc", 3, 0, 0)]
        text = _threaded_report({"list"}, zero)
        self.assertEqual(test_support.one_line(self, text, "| list | 297"),
                         "| list | 297.9 | mimalloc 0.0 | - | 1.1 | mimalloc 0.0 | - |")

    def test_left_out_without_the_measures(self):
        self.assertNotIn("The resident set once a phase", _threaded_report({"larson"}, RECORDS))


if __name__ == "__main__":
    unittest.main()
