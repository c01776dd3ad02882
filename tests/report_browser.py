#!/usr/bin/env python3
"""Every bundled scenario's report.html, opened in headless Chromium: each chart drew (a
canvas with pixels) and the page logged no error. The page checks itself (report_page.html's
self-check sets data-charts, data-drawn, data-errors on <body>); this reads the rendered DOM.
Two scenarios at a time: the replays are most of the suite's longest test.
   report_browser.py LOOM_BINARY SCENARIOS_DIR [--screenshots DIR]"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium(args, profile):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--user-data-dir=" + profile,
                           "--virtual-time-budget=10000"] + args,
                          capture_output=True, text=True, timeout=120)


def check(loom, scenario, work, shots):
    name = os.path.splitext(os.path.basename(scenario))[0]
    out = os.path.join(work, name)
    # Sanitized builds run several times slower (scripts/test --sanitize sets the scale).
    scale = float(os.environ.get("LOOM_TEST_TIME_SCALE", "1"))
    r = subprocess.run([loom, "replay", scenario, "--out", out], capture_output=True, text=True,
                       timeout=600 * scale)
    if r.returncode != 0:
        return None, f"{name}: replay exited {r.returncode}: {r.stderr.strip()}"
    page = "file://" + os.path.join(out, "report.html")
    profile = os.path.join(work, name + "-profile")  # one Chromium per profile at a time
    dom = chromium(["--dump-dom", page], profile)
    body = re.search(r"<body([^>]*)>", dom.stdout)
    if not body:
        return None, (f"{name}: no rendered <body> (chromium exit {dom.returncode}): "
                      f"{dom.stderr[-500:]}")
    attrs = dict(re.findall(r'data-(\w+)="([^"]*)"', body.group(1)))
    selfcheck = re.search(r'id="loom-selfcheck">([^<]*)<', dom.stdout)
    detail = selfcheck.group(1) if selfcheck else "no self-check"
    charts, drawn = int(attrs.get("charts", -1)), int(attrs.get("drawn", -1))
    if charts <= 0 or drawn != charts or attrs.get("errors") != "0":
        return None, f"{name}: charts={charts} drawn={drawn} errors={attrs.get('errors')}: {detail}"
    if "Uncaught" in dom.stderr:
        return None, f"{name}: {dom.stderr[-500:]}"
    if shots:
        chromium([f"--screenshot={os.path.join(shots, name + '.png')}", "--window-size=1400,2400",
                  page], profile)
    return f"{name}: {charts} charts drawn, no errors", None


def main():
    loom, scenarios = sys.argv[1], sys.argv[2]
    shots = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--screenshots" else None
    if not os.path.exists(CHROMIUM):
        print("chromium is not installed: scripts/bootstrap installs it", file=sys.stderr)
        return 1
    files = [os.path.join(scenarios, f) for f in sorted(os.listdir(scenarios))
             if f.endswith(".toml")]
    failures = []
    with tempfile.TemporaryDirectory(prefix="loom-report-") as work, \
            concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for passed, problem in pool.map(lambda f: check(loom, f, work, shots), files):
            if passed:
                print(passed, flush=True)
            else:
                failures.append(problem)
    for p in failures:
        print("FAIL " + p, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
