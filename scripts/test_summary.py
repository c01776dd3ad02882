#!/usr/bin/env python3
"""Counts test cases across the suites of a `meson test` run and prints one closing line,
'test cases: N passed, N failed'. Boost.Test and CAF test suites report their own counts; a
check without cases (a script) counts as one; a suite that crashed before reporting counts as
one failure."""
import json
import re
import sys

BOOST = re.compile(r"(\d+) test cases? out of (\d+) (passed|failed|aborted|skipped)")
CAF_TESTS = re.compile(r"^\s*tests:\s+(\d+)\s*$", re.M)
CAF_FAILED = re.compile(r"^\s*- [\w.]+:\S+\s*$", re.M)


def counts(text, ok):
    """(passed, failed) of one suite."""
    boost = {kind: int(n) for n, _, kind in BOOST.findall(text)}
    if boost:
        failed = boost.get("failed", 0) + boost.get("aborted", 0)
        return boost.get("passed", 0), failed if ok or failed else 1
    caf = CAF_TESTS.findall(text)
    if caf:
        total = int(caf[-1])
        failed = len(CAF_FAILED.findall(text.split("failed tests:")[-1])) if not ok else 0
        return total - failed, failed if ok or failed else 1
    return (1, 0) if ok else (0, 1)


passed = failed = 0
with open(sys.argv[1], encoding="utf-8") as log:
    for line in log:
        entry = json.loads(line)
        text = (entry.get("stdout") or "") + (entry.get("stderr") or "")
        p, f = counts(text, entry.get("result") == "OK")
        print(f"{entry['name']:>17}: {entry.get('result')}, {p} passed, {f} failed")
        passed += p
        failed += f
print(f"test cases: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
