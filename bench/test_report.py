#!/usr/bin/env python3
"""bench/test_report.py - unit test of the programs' own measures in
results.md: aggregate keeps them from the 1-thread, unpinned runs that went
well, and the report shows them under a threaded benchmark's table (larson's
round times) as under the others'.

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


def _record(allocator, threads, value, measures, status="ok", pinned=False, repetition=1):
    return {"repetition": repetition, "benchmark": "larson", "threads": threads, "pinned": pinned,
            "allocator": allocator, "status": status, "metric": "throughput", "value": value,
            "unit": "ops/s", "checksum": "0" * 16, "maxrss_kb": 2000, "wall_s": 1.0,
            "args": "ops=1", "detail": "", "measures": measures}


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


class ThreadedBenchmarkShowsMeasures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        larson = next(b for b in suite.BENCHMARKS if b.name == "larson")
        tables = aggregate.tables(RECORDS, ALLOCATORS)
        settings = SimpleNamespace(
            quick=True, repetitions=3, elapsed_s=6.0, load_start=0.0, load_end=0.0,
            skipped_allocators=[], pinned_threads=4, fastpath_args=["pairs=10"],
            fastpath_overhead=1.0, configs=lambda b: [(1, False), (2, False), (1, True)],
            argv=lambda b, t: [f"threads={t}", "ops=1"])
        written = report.Report(settings, [("CPU", "test")], ALLOCATORS, [larson], tables,
                                lambda column: aggregate.best_peer(column, ALLOCATORS), {}, {}, [],
                                set(), aggregate.measures(RECORDS))
        cls.text = test_support.report_text(written)

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


if __name__ == "__main__":
    unittest.main()
