#!/usr/bin/env python3
"""Counts Boost.Test cases across the suites of a `meson test` run and prints one closing line,
'test cases: N passed, N failed'. A suite that crashed before reporting counts as one failure."""
import json
import re
import sys

REPORT = re.compile(r"(\d+) test cases? out of (\d+) (passed|failed|aborted|skipped)")

passed = failed = 0
with open(sys.argv[1], encoding="utf-8") as log:
    for line in log:
        entry = json.loads(line)
        text = (entry.get("stdout") or "") + (entry.get("stderr") or "")
        counts = {kind: int(n) for n, _, kind in REPORT.findall(text)}
        ok = entry.get("result") == "OK"
        if not counts:
            passed_here, failed_here = (0, 1) if not ok else (0, 0)
        else:
            passed_here = counts.get("passed", 0)
            failed_here = counts.get("failed", 0) + counts.get("aborted", 0)
            if not ok and failed_here == 0:
                failed_here = 1
        print(f"{entry['name']:>14}: {entry.get('result')}, {passed_here} passed, {failed_here} failed")
        passed += passed_here
        failed += failed_here
print(f"test cases: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
