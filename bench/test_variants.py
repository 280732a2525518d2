#!/usr/bin/env python3
"""bench/test_variants.py - unit test of BENCH_VARIANTS: parsing the knob,
and keeping variants out of the peers while giving them ratios to the best
peer (aggregate, report, plot styles, the commands that reproduce a run).

    python3 bench/test_variants.py      (make bench-quick runs it first)

Standard library only, no benchmark is run, well under a second.
"""

import os
import sys
import tempfile
import unittest
from types import SimpleNamespace
from unittest import mock

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aggregate  # noqa: E402
import allocators  # noqa: E402
import callgrind  # noqa: E402
import measure  # noqa: E402
import plot  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import suite  # noqa: E402
import test_support  # noqa: E402

Allocator = allocators.Allocator


class ParseVariants(unittest.TestCase):
    def test_empty_knob_means_no_variant(self):
        self.assertEqual(allocators.parse_variants(None), [])
        self.assertEqual(allocators.parse_variants(""), [])
        self.assertEqual(allocators.parse_variants(" , "), [])

    def test_library_only(self):
        self.assertEqual(allocators.parse_variants("old=/tmp/before/libpcmalloc.so"),
                         [("old", "/tmp/before/libpcmalloc.so", {})])

    def test_relative_library_is_taken_from_base_dir(self):
        parsed = allocators.parse_variants("cas=build/x86_64/libpcmalloc.so:PCMALLOC_RSEQ=0",
                                           base_dir="/work/tree")
        self.assertEqual(parsed, [("cas", "/work/tree/build/x86_64/libpcmalloc.so",
                                   {"PCMALLOC_RSEQ": "0"})])

    def test_several_variants_and_variables_in_order(self):
        parsed = allocators.parse_variants(
            " pcmalloc-before=/a/lib.so , pcmalloc-cas=/b/lib.so:PCMALLOC_RSEQ=0:PCMALLOC_CPUS=1,",
            base_dir="/")
        self.assertEqual([name for name, _, _ in parsed], ["pcmalloc-before", "pcmalloc-cas"])
        self.assertEqual(parsed[1][2], {"PCMALLOC_RSEQ": "0", "PCMALLOC_CPUS": "1"})
        self.assertEqual(list(parsed[1][2]), ["PCMALLOC_RSEQ", "PCMALLOC_CPUS"])

    def test_value_may_hold_equals_and_be_empty(self):
        parsed = allocators.parse_variants("v=/l.so:A=x=y:B=")
        self.assertEqual(parsed[0][2], {"A": "x=y", "B": ""})

    def test_malformed_entries_are_rejected(self):
        for text in ["nolibrary", "=/l.so", "v=", "v=:A=1", "v=/l.so:A", "v=/l.so:1A=2",
                     "v=/l.so:=2", "two words=/l.so", "-v=/l.so", "v=/l.so:A=1:A=2",
                     "v=/a.so,v=/b.so", "pcmalloc=/l.so", "glibc=/l.so"]:
            with self.subTest(text=text), self.assertRaises(ValueError):
                allocators.parse_variants(text)

    def test_bad_knob_stops_the_runner_before_any_run(self):
        with mock.patch.dict(os.environ, {"BENCH_VARIANTS": "cas=/l.so:PCMALLOC_RSEQ"}):
            with self.assertRaises(SystemExit) as stopped:
                run.Settings()
        self.assertIn("BENCH_VARIANTS", str(stopped.exception))

    def test_runner_settings_carry_the_variants(self):
        with mock.patch.dict(os.environ, {"BENCH_VARIANTS": "cas=/l.so:PCMALLOC_RSEQ=0"}):
            self.assertEqual(run.Settings().variants, [("cas", "/l.so", {"PCMALLOC_RSEQ": "0"})])

    def test_version_file_beside_the_library_names_the_build(self):
        with tempfile.TemporaryDirectory() as work:
            library = os.path.join(work, "libpcmalloc.so")
            with open(library + ".version", "w", encoding="utf-8") as f:
                f.write("commit 3959393 (Large allocation)\n")
            self.assertEqual(allocators._variant_version(library),
                             "variant: commit 3959393 (Large allocation)")
            self.assertEqual(allocators._variant_version(os.path.join(work, "other.so")),
                             "variant")

    def test_missing_library_is_a_problem_not_a_crash(self):
        found = allocators.variant_allocators([("gone", "/nonexistent/lib.so", {"A": "1"})])
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0].is_variant)
        self.assertFalse(found[0].is_peer)
        self.assertIn("does not exist", found[0].problem)


def _allocators():
    return [Allocator("pcmalloc", "/new/lib.so", False, "commit new"),
            Allocator("pcmalloc-before", "/old/lib.so", False, "variant", is_variant=True),
            Allocator("pcmalloc-cas", "/new/lib.so", False, "variant",
                      env={"PCMALLOC_RSEQ": "0"}, is_variant=True),
            Allocator("glibc", None, True, "2.36"),
            Allocator("jemalloc", "/usr/lib/libjemalloc.so.2", True, "5.3")]


def _record(allocator, value, metric="time", status="ok", benchmark="tree", threads=1):
    return {"repetition": 1, "benchmark": benchmark, "threads": threads, "pinned": False,
            "allocator": allocator, "status": status, "metric": metric, "value": value,
            "unit": "s" if metric == "time" else "objects/s", "checksum": "0" * 16,
            "maxrss_kb": 1000 * value, "wall_s": value, "args": "nodes=1", "detail": ""}


# Times of the tree benchmark: the old build beats every peer, so it would
# be "the best peer" if variants were counted as peers.
TREE_TIMES = {"pcmalloc": 1.5, "pcmalloc-before": 0.5, "pcmalloc-cas": 3.0,
              "glibc": 2.0, "jemalloc": 1.0}


class PeerVariantSplit(unittest.TestCase):
    def setUp(self):
        self.allocators = _allocators()
        records = [_record(name, value) for name, value in TREE_TIMES.items()]
        self.tables = aggregate.tables(records, self.allocators)
        self.column = self.tables[("tree", 1, False)]

    def test_best_peer_is_never_a_variant(self):
        self.assertEqual(aggregate.best_peer(self.column, self.allocators), "jemalloc")

    def test_variants_get_ratios_to_the_best_peer(self):
        self.assertAlmostEqual(self.column["pcmalloc"].time_ratio, 1.5)
        self.assertAlmostEqual(self.column["pcmalloc-before"].time_ratio, 0.5)
        self.assertAlmostEqual(self.column["pcmalloc-cas"].time_ratio, 3.0)
        self.assertAlmostEqual(self.column["pcmalloc-before"].rss_ratio, 0.5)

    def test_bold_is_the_best_of_everyone(self):
        self.assertTrue(self.column["pcmalloc-before"].best_time)
        self.assertFalse(self.column["jemalloc"].best_time)

    def test_throughput_ratios_are_times_too(self):
        records = [_record(n, v, "throughput", benchmark="lifo", threads=2)
                   for n, v in {"pcmalloc": 10.0, "pcmalloc-before": 40.0, "glibc": 20.0}.items()]
        column = aggregate.tables(records, self.allocators)[("lifo", 2, False)]
        self.assertAlmostEqual(column["pcmalloc"].time_ratio, 2.0)
        self.assertAlmostEqual(column["pcmalloc-before"].time_ratio, 0.5)
        self.assertEqual(aggregate.best_peer(column, self.allocators), "glibc")

    def test_versus_divides_pcmalloc_by_the_variant(self):
        self.assertEqual([round(r, 6) for r in
                          aggregate.versus(self.tables, "pcmalloc", "pcmalloc-before")], [3.0])
        self.assertEqual([round(r, 6) for r in
                          aggregate.versus(self.tables, "pcmalloc", "pcmalloc-cas")], [0.5])

    def test_versus_skips_failed_columns(self):
        records = [_record("pcmalloc", 1.0), _record("pcmalloc-before", 1.0, status="crash"),
                   _record("glibc", 1.0)]
        tables = aggregate.tables(records, self.allocators)
        self.assertEqual(aggregate.versus(tables, "pcmalloc", "pcmalloc-before"), [])

    def test_fastpath_ratios_use_peers_only(self):
        counts = {0: {"pcmalloc": callgrind.Count(True, 120.0),
                      "pcmalloc-before": callgrind.Count(True, 30.0),
                      "glibc": callgrind.Count(True, 120.0),
                      "jemalloc": callgrind.Count(True, 60.0)}}
        ratios = aggregate.fastpath_ratios(counts, self.allocators)[0]
        self.assertAlmostEqual(ratios["pcmalloc"], 2.0)
        self.assertAlmostEqual(ratios["pcmalloc-before"], 0.5)


class Report(unittest.TestCase):
    """results.md as written for the tables of PeerVariantSplit."""

    @classmethod
    def setUpClass(cls):
        allocs = _allocators()
        records = [_record(name, value) for name, value in TREE_TIMES.items()]
        tables = aggregate.tables(records, allocs)
        fastpath = {0: {"pcmalloc": callgrind.Count(True, 120.0),
                        "pcmalloc-before": callgrind.Count(True, 30.0),
                        "pcmalloc-cas": callgrind.Count(False, detail="boom"),
                        "glibc": callgrind.Count(True, 120.0),
                        "jemalloc": callgrind.Count(True, 60.0)}}
        tree = next(b for b in suite.BENCHMARKS if b.name == "tree")
        settings = SimpleNamespace(
            quick=True, repetitions=1, elapsed_s=6.0, load_start=0.0, load_end=0.0,
            skipped_allocators=[], pinned_threads=4, fastpath_args=["pairs=10"],
            fastpath_overhead=1.0, configs=lambda b: [(1, False)],
            argv=lambda b, t: ["nodes=1"])
        written = report.Report(settings, [("CPU", "test")], allocs, [tree], tables,
                                lambda column: aggregate.best_peer(column, allocs), fastpath,
                                aggregate.fastpath_ratios(fastpath, allocs), [], set())
        cls.text = test_support.report_text(written)

    def _line(self, start):
        return test_support.one_line(self, self.text, start)

    def test_peers_named_in_the_header_exclude_variants(self):
        self.assertIn("(the best of glibc, jemalloc)", self.text)

    def test_header_lists_each_variant_with_library_and_environment(self):
        self.assertEqual(self._line("| pcmalloc-cas | `/new/lib.so`"),
                         "| pcmalloc-cas | `/new/lib.so` | `PCMALLOC_RSEQ=0` | variant |")
        self.assertIn("**pcmalloc-before** `/old/lib.so`;", self.text)
        self.assertIn("**pcmalloc-cas** `/new/lib.so` with `PCMALLOC_RSEQ=0`", self.text)

    def test_glance_shows_variant_ratios_beside_pcmalloc(self):
        self.assertIn("| time vs best peer | pcmalloc-before time vs best peer | "
                      "pcmalloc-cas time vs best peer | peak RSS vs best peer |", self.text)
        self.assertEqual(self._line("| tree | - |"),
                         "| tree | - | 1.50 s | jemalloc 1.00 s | 1.50 | 0.50 | 3.00 | 1.50 |")

    def test_glance_fastpath_best_peer_is_a_peer(self):
        self.assertEqual(self._line("| fastpath (callgrind) |"),
                         "| fastpath (callgrind) | size 16..512 mixed | 120 instr "
                         "| jemalloc 60 instr | 2.00 | 0.50 | **FAIL** | |")

    def test_versus_table(self):
        self.assertEqual(self._line("| pcmalloc-before | 1 |"),
                         "| pcmalloc-before | 1 | 3.00 | 3.00 | 3.00 | 0 | 0 | 1 |")
        self.assertEqual(self._line("| pcmalloc-cas | 1 |"),
                         "| pcmalloc-cas | 1 | 0.50 | 0.50 | 0.50 | 1 | 0 | 0 |")

    def test_benchmark_table_has_a_row_per_variant(self):
        self.assertTrue(self._line("| pcmalloc-before | **0.5** | 0.50 |"))


class Runs(unittest.TestCase):
    """How a variant's runs are started and reproduced."""

    def test_variant_variables_reach_its_runs_only(self):
        with mock.patch.dict(os.environ, {"LD_PRELOAD": "/x.so"}):
            os.environ.pop("PCMALLOC_RSEQ", None)
            env = measure._environment("/new/lib.so", {"PCMALLOC_RSEQ": "0"})
            plain = measure._environment("/new/lib.so")
        self.assertEqual(env["PCMALLOC_RSEQ"], "0")
        self.assertEqual(env["BENCH_CHILD_PRELOAD"], "/new/lib.so")
        self.assertNotIn("LD_PRELOAD", env)  # the launcher itself runs without it
        self.assertNotIn("PCMALLOC_RSEQ", plain)

    def test_variant_variables_reach_its_callgrind_count(self):
        seen = {}

        def fake_run(command, env, **_):
            seen.update(env)
            return SimpleNamespace(returncode=1, stdout="", stderr="stopped here")
        with mock.patch.object(callgrind.subprocess, "run", fake_run):
            count = callgrind.measure("/b/fastpath", "/new/lib.so", 0, ["pairs=10"], 0.0,
                                      extra_env={"PCMALLOC_RSEQ": "0"})
        self.assertFalse(count.ok)
        self.assertEqual(seen.get("PCMALLOC_RSEQ"), "0")
        self.assertEqual(seen.get("LD_PRELOAD"), "/new/lib.so")

    def test_display_order_puts_variants_after_pcmalloc(self):
        allocs = _allocators()
        found = [a for a in allocs if not a.is_variant]
        variants = [a for a in allocs if a.is_variant]
        self.assertEqual([a.name for a in run.with_variants(found, variants)],
                         ["pcmalloc", "pcmalloc-before", "pcmalloc-cas", "glibc", "jemalloc"])

    def test_failure_command_sets_the_variant_environment(self):
        cas = _allocators()[2]
        self.assertEqual(run.reproduce(cas, True, "/b/lifo", "threads=4"),
                         "PCMALLOC_RSEQ=0 LD_PRELOAD=/new/lib.so taskset -c 0 /b/lifo threads=4")

    def test_each_variant_has_its_own_colour_and_dash(self):
        allocs = _allocators()
        styles = [plot.style(a, allocs) for a in allocs]
        colours = [colour for colour, _ in styles]
        self.assertEqual(len(set(colours)), len(colours))
        self.assertEqual([dash for _, dash in styles], [1, 2, 3, 1, 1])


if __name__ == "__main__":
    unittest.main(verbosity=1)
