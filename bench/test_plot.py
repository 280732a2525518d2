#!/usr/bin/env python3
"""bench/test_plot.py - unit test of the plotter without gnuplot: a machine
that lacks it (bench/run.py started without make bench's set-up) still
gets its results.md, with no plot and no crash.

    python3 bench/test_plot.py      (make bench-quick runs it first)

Standard library only, no benchmark is run, well under a second.
"""

import os
import sys
import tempfile
import unittest
from unittest import mock

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import plot  # noqa: E402


class WithoutGnuplot(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.TemporaryDirectory()
        with mock.patch("shutil.which", return_value=None):
            self.plotter = plot.Plotter(self.out.name)

    def tearDown(self):
        self.out.cleanup()

    def test_the_summary_is_skipped_and_nothing_is_written(self):
        groups = [("larson", [(0, 1.2, {})])]
        drawn = self.plotter.summary("summary", groups, ["1 thread"], [("larson", 1.1)], "a machine")
        self.assertFalse(drawn)
        self.assertEqual(os.listdir(self.out.name), [])


if __name__ == "__main__":
    unittest.main(verbosity=1)
