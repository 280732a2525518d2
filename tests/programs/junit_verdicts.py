"""tests/programs/junit_verdicts.py FILE.xml [CASE...] - the verdict of every
test case in a JUnit XML report (CPython's `-m test --junit-xml`), one line
each, "<verdict> <test case>", sorted, for cpython_tests.sh to compare two
runs; or, given test cases, the end of the message of each that did not
pass (what a failure report shows).

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


def details(cases, wanted):
    for case in cases:
        if case.get("name") not in wanted or verdict(case) == "ok":
            continue
        node = case.find(verdict(case))
        text = (node.text or node.get("message") or "").rstrip().splitlines()
        print(f"--- {verdict(case)} {case.get('name')}")
        print("\n".join(text[-12:]))


def main(path, wanted):
    cases = list(ET.parse(path).getroot().iter("testcase"))
    if wanted:
        details(cases, set(wanted))
    else:
        print("\n".join(sorted(f"{verdict(case)} {case.get('name')}" for case in cases)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
