"""tests/programs/junit_verdicts.py FILE.xml - the verdict of every test case
in a JUnit XML report (CPython's `-m test --junit-xml`), one line each,
"<verdict> <test case>", sorted, for cpython_tests.sh to compare two runs.

Sorted because `-j` runs the modules in parallel and writes them in the
order they finish.  Only the verdict (ok, skipped, failure, error) counts,
not the time or the message, which differ from run to run.
"""
import sys
import xml.etree.ElementTree as ET


def verdict(case):
    # A case holds a <failure>, <error> or <skipped> child when it did not
    # simply pass; the report writes no child for a pass.
    for tag in ("error", "failure", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "ok"


def main(path):
    lines = sorted(f"{verdict(case)} {case.get('name')}"
                   for case in ET.parse(path).getroot().iter("testcase"))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
