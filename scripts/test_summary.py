#!/usr/bin/env python3
"""Counts test cases across the suites of a `meson test` run and prints one closing line,
'test cases: N passed, N failed'. Boost.Test and CAF test suites report their own counts; a
check without cases (a script) counts as one; a suite that crashed before reporting counts as
one failure.
   test_summary.py TESTLOG_JSON [--failures]
--failures prints, for every suite that did not pass, its failed checks and the end of its
output instead: CI keeps only the end of a long log, so .ci/run repeats them there."""
import json
import re
import sys

BOOST = re.compile(r"(\d+) test cases? out of (\d+) (passed|failed|aborted|skipped)")
CAF_TESTS = re.compile(r"^\s*tests:\s+(\d+)\s*$", re.M)
CAF_FAILED = re.compile(r"^\s*- [\w.]+:\S+\s*$", re.M)
CHECK_FAILED = re.compile(r"error: in \"|fatal error|has failed|FAIL|Traceback|Error:")
TAIL_LINES = 40


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


def print_failure(entry, text):
    """One failed suite: its result, each failed check, and its last lines."""
    lines = text.splitlines()
    print(f"==== {entry['name']}: {entry.get('result')} after {entry.get('duration', 0):.1f} s")
    for line in (l for l in lines if CHECK_FAILED.search(l)):
        print("  " + line[:400])
    print(f"  -- its last {TAIL_LINES} lines:")
    for line in lines[-TAIL_LINES:]:
        print("  " + line[:400])


def main():
    failures_only = sys.argv[2:] == ["--failures"]
    passed = failed = 0
    with open(sys.argv[1], encoding="utf-8") as log:
        for line in log:
            entry = json.loads(line)
            text = (entry.get("stdout") or "") + (entry.get("stderr") or "")
            ok = entry.get("result") == "OK"
            p, f = counts(text, ok)
            if failures_only:
                if not ok:
                    print_failure(entry, text)
            else:
                print(f"{entry['name']:>17}: {entry.get('result')}, {p} passed, {f} failed")
            passed += p
            failed += f
    print(f"test cases: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
