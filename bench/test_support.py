"""bench/test_support.py - what the runner's unit tests (test_*.py) share:
the text a report writes, and the one line of it that starts a given way.
Standard library only."""

from unittest import mock


def report_text(written):
    """results.md as `written` (a report.Report) writes it, with no file."""
    with mock.patch("builtins.open", mock.mock_open()) as opened:
        written.write("results.md")
    return "".join(c.args[0] for c in opened().write.call_args_list)


def one_line(case, text, start):
    """The only line of text that starts with `start`; case fails otherwise."""
    lines = [line for line in text.splitlines() if line.startswith(start)]
    case.assertEqual(len(lines), 1, f"one line starting {start!r} in:\n{text}")
    return lines[0]
