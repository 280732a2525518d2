#!/usr/bin/env python3
"""bench/test_overlap.py - unit test of the noise marks: when the runs of
two cells overlap (aggregate.overlap, and rss_overlap for their peak RSS),
and the ≈ that "At a glance" puts beside the ratios of such columns, with
the counts under the table.

    python3 bench/test_overlap.py      (make bench-quick runs it first)

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


def _records(allocator, times, threads, rss=None):
    rss = rss or [1000.0] * len(times)
    return [{"repetition": i + 1, "benchmark": "larson", "threads": threads, "pinned": False,
             "allocator": allocator, "status": "ok", "metric": "time", "value": t, "unit": "s",
             "checksum": "0" * 16, "maxrss_kb": kb, "wall_s": t, "args": "ops=1",
             "detail": ""} for i, (t, kb) in enumerate(zip(times, rss))]


def _cell(times, status="ok", rss=None):
    records = _records("glibc", times, 1, rss)
    for r in records:
        r["status"] = status
    return aggregate.tables(records, [allocators.Allocator("glibc", None, True, "2.36")])[
        ("larson", 1, False)]["glibc"]


class Overlap(unittest.TestCase):
    def test_ranges_that_meet_overlap_either_way_round(self):
        self.assertTrue(aggregate.overlap(_cell([1.0, 2.0, 3.0]), _cell([2.5, 4.0, 5.0])))
        self.assertTrue(aggregate.overlap(_cell([2.5, 4.0, 5.0]), _cell([1.0, 2.0, 3.0])))
        self.assertTrue(aggregate.overlap(_cell([1.0, 2.0]), _cell([2.0, 3.0])))  # one shared end

    def test_one_range_inside_the_other_overlaps(self):
        self.assertTrue(aggregate.overlap(_cell([1.0, 5.0, 9.0]), _cell([4.0, 4.5, 5.0])))

    def test_separate_ranges_do_not(self):
        self.assertFalse(aggregate.overlap(_cell([1.0, 1.5, 2.0]), _cell([2.1, 3.0])))
        self.assertFalse(aggregate.overlap(_cell([2.1, 3.0]), _cell([1.0, 1.5, 2.0])))

    def test_single_runs_overlap_only_when_equal(self):
        self.assertTrue(aggregate.overlap(_cell([1.5]), _cell([1.5])))
        self.assertFalse(aggregate.overlap(_cell([1.5]), _cell([1.6])))

    def test_peak_rss_ranges_overlap_by_the_same_rule(self):
        low = _cell([1.0, 1.0], rss=[900.0, 1000.0])
        high = _cell([1.0, 1.0], rss=[1000.0, 1200.0])
        higher = _cell([1.0, 1.0], rss=[1001.0, 1200.0])
        self.assertTrue(aggregate.rss_overlap(low, high))
        self.assertFalse(aggregate.rss_overlap(low, higher))
        self.assertFalse(aggregate.rss_overlap(higher, low))

    def test_a_failed_cell_overlaps_nothing(self):
        self.assertFalse(aggregate.overlap(_cell([1.0, 2.0], status="crashed"), _cell([1.0, 2.0])))
        self.assertFalse(aggregate.overlap(_cell([1.0, 2.0]), _cell([1.0, 2.0], status="timeout")))


# Times of larson at 1, 2 and 4 threads (lower is better, as "time" cells):
#   1: pcmalloc's median equals jemalloc's and the runs overlap - a tie it wins by the rule;
#   2: pcmalloc 1.83 x slower and every run slower - a loss, no mark;
#   4: pcmalloc 1.12 x slower by the medians, but its fastest run beats
#      jemalloc's slowest - a loss the noise could reverse.
TIMES = {
    1: {"pcmalloc": [1.0, 1.2, 1.4], "jemalloc": [1.1, 1.2, 1.3], "glibc": [3.0, 3.1, 3.2]},
    2: {"pcmalloc": [2.0, 2.1, 2.2], "jemalloc": [1.1, 1.15, 1.2], "glibc": [3.0, 3.1, 3.2]},
    4: {"pcmalloc": [1.3, 1.4, 1.5], "jemalloc": [1.2, 1.25, 1.35], "glibc": [3.0, 3.1, 3.2]},
}
# Their peak RSS in KiB, glibc the smallest peer each time:
#   1: pcmalloc 1.16 x glibc's by the medians, its least meets glibc's most - marked;
#   2: pcmalloc twice glibc's in every run - no mark;
#   4: pcmalloc below glibc in every run - no mark.
RSS = {
    1: {"pcmalloc": [1000.0, 1100.0, 1200.0], "jemalloc": [1150.0] * 3, "glibc": [900.0, 950.0, 1000.0]},
    2: {"pcmalloc": [2000.0] * 3, "jemalloc": [1100.0] * 3, "glibc": [1000.0] * 3},
    4: {"pcmalloc": [900.0] * 3, "jemalloc": [1100.0] * 3, "glibc": [1000.0] * 3},
}


class GlanceMarks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        allocs = [allocators.Allocator("pcmalloc", "/new/lib.so", False, "commit new"),
                  allocators.Allocator("glibc", None, True, "2.36"),
                  allocators.Allocator("jemalloc", "/usr/lib/libjemalloc.so.2", True, "5.3")]
        records = [r for threads, cells in TIMES.items() for name, times in cells.items()
                   for r in _records(name, times, threads, RSS[threads][name])]
        tables = aggregate.tables(records, allocs)
        cls.allocs, cls.tables = allocs, tables
        larson = next(b for b in suite.BENCHMARKS if b.name == "larson")
        settings = SimpleNamespace(
            quick=False, repetitions=3, elapsed_s=6.0, load_start=0.0, load_end=0.0,
            skipped_allocators=[], pinned_threads=0, fastpath_args=["pairs=10"],
            fastpath_overhead=1.0, configs=lambda b: [(t, False) for t in TIMES],
            argv=lambda b, t: ["ops=1"])
        written = report.Report(settings, [("CPU", "test")], allocs, [larson], tables,
                                lambda column: aggregate.best_peer(column, allocs), {}, {}, [], set())
        cls.text = test_support.report_text(written)

    def _line(self, start):
        return test_support.one_line(self, self.text, start)

    def test_a_tie_by_the_medians_with_overlapping_runs_is_marked(self):
        self.assertEqual(self._line("| larson | 1 |"),
                         "| larson | 1 | 1.20 s | jemalloc 1.20 s | 1.00 ≈ | 1.16 ≈ |")

    def test_a_loss_outside_the_noise_is_not_marked(self):
        self.assertEqual(self._line("| larson | 2 |"),
                         "| larson | 2 | 2.10 s | jemalloc 1.15 s | 1.83 | 2.00 |")

    def test_a_loss_the_noise_could_reverse_is_marked(self):
        self.assertEqual(self._line("| larson | 4 |"),
                         "| larson | 4 | 1.40 s | jemalloc 1.25 s | 1.12 ≈ | 0.90 |")

    def test_the_line_under_the_table_counts_wins_and_losses_apart(self):
        self.assertIn("In 2 columns (marked ≈: 1 of the first kind, 1 slower) the runs of "
                      "pcmalloc and of the best peer overlap", self.text)
        self.assertIn("Its peak RSS is above the smallest peer's in 2 columns, in 1 of them (≈) "
                      "within the overlap of their runs.", self.text)

    def test_the_line_under_the_table_counts_the_least_rss_of_the_preloaded(self):
        # jemalloc is the only preloaded peer: pcmalloc's median is below its
        # at 1 and 4 threads, above it at 2; glibc's smaller RSS does not count.
        self.assertIn("Of the allocators loaded with LD_PRELOAD (every peer but glibc, whose "
                      "malloc comes with the C library that every program maps anyway), it had "
                      "the least peak RSS in 2 of 3 columns.", self.text)

    def test_the_smallest_preloaded_peer_leaves_glibc_out(self):
        column = self.tables[("larson", 1, False)]
        self.assertEqual(aggregate.smallest_peer(column, self.allocs).rss_kb, 950.0)
        self.assertEqual(aggregate.smallest_peer(column, self.allocs, preloaded=True).rss_kb, 1150.0)

    def test_how_to_read_explains_the_mark(self):
        self.assertIn("- ≈ beside a ratio at a glance:", self.text)


if __name__ == "__main__":
    unittest.main(verbosity=1)
