#!/usr/bin/env python3
"""Every bundled scenario's report.html, opened in headless Chromium: each chart drew (a
canvas with pixels) and the page logged no error. The page checks itself (report_page.html's
self-check sets data-charts, data-drawn, data-errors on <body>); this reads the rendered DOM.
Two scenarios at a time: the replays are most of the suite's longest test.

Each scenario replays on a thinned copy (PAGES or SANITIZED below):
- unsanitized: every job and step of it, on its first two seeds and the first two values of
  each sweep axis. A page draws the same charts from two seeds and two points as from eight
  and forty (the spread across seeds, each axis' curve); at full length the replays took 269
  of the normal suite's 688 CPU-s, most of them repeating the same figures on more numbers.
- --sanitized (an ASan/UBSan build): its first seed, a quarter of its jobs over a quarter of
  its span (the same density), three of its generation steps, a quarter of its MoE
  iterations, the first two values of each named sweep axis and the first of each numeric
  one, and no page is drawn. The sanitizers watch the C++ code, which every policy, feature
  and workload kind of a scenario runs through at that size as at full size (at full size
  they repeat it on more numbers, ten times slower under ASan: 642 s of the sanitized
  suite's 17 minutes); the pages are the unsanitized suite's to check. A scenario that is
  another's with other numbers only (COVERED_BY) is not replayed there: its code paths are
  the other's.
   report_browser.py LOOM_BINARY SCENARIOS_DIR [--screenshots DIR | --sanitized]"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# What a thinned copy keeps (the module's docstring says why): seeds, values of a named and of
# a numeric sweep axis, whether the workload shrinks to a quarter, generation steps.
PAGES = {"seeds": 2, "named_axis": 2, "numeric_axis": 2, "quarter": False, "steps": None}
SANITIZED = {"seeds": 1, "named_axis": 2, "numeric_axis": 1, "quarter": True, "steps": 3}

# Sanitized, these repeat another scenario's code on other numbers: a job family of
# weave-mixed's three, a round-robin deal that gen-grpo-contiguous's static sweep deals too,
# the 25K scenario at 15K tokens. Their pages are still drawn and checked unsanitized.
COVERED_BY = {"weave-bl": "weave-mixed", "weave-rh": "weave-mixed", "weave-th": "weave-mixed",
              "gen-grpo-round-robin": "gen-grpo-contiguous",
              "gen-qwen14b-15k": "gen-qwen14b-25k"}


def chromium(args, profile):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--user-data-dir=" + profile,
                           "--virtual-time-budget=10000"] + args,
                          capture_output=True, text=True, timeout=120)


def thinned(text, keep):
    """The scenario thinned as `keep` says: only keys of the tables named here change, so any
    scenario kind thins the same way."""
    lines, table = [], ""
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[+([^\]]+)\]", line)
        if header:
            table = header.group(1)
        lines.append(thinned_line(table, line, keep))
    return "".join(lines)


def thinned_line(table, line, keep):
    value = re.match(r"(\s*([\w-]+)\s*=\s*)([^#\n]*?)(\s*(#.*)?\n?)$", line, flags=re.S)
    if not value:
        return line
    head, key, body, tail = value.group(1), value.group(2), value.group(3), value.group(4)
    number = re.fullmatch(r"\d+(\.\d+)?", body)
    quarter = {("workload", "jobs"), ("workload", "span_h"), ("moe", "iterations")}
    if number and keep["quarter"] and (table, key) in quarter:
        shrunk = max(float(body) / 4, 1.0)
        body = str(int(shrunk)) if "." not in body else f"{shrunk:g}"
    elif number and keep["steps"] and (table, key) == ("workload", "steps"):
        body = str(min(int(body), keep["steps"]))
    elif body.startswith("[") and (table == "scenario" and key == "seeds"
                                   or table.endswith("_sweep")):
        items = [i for i in body.strip("[]").split(",") if i.strip()]
        named = items and items[0].strip().startswith('"')
        kept = (keep["seeds"] if table == "scenario"
                else keep["named_axis"] if named else keep["numeric_axis"])
        body = "[" + ",".join(items[:kept]) + "]"
    return head + body + tail


def thinned_copy(scenario, work, keep):
    """A thinned copy of `scenario` whose relative paths resolve as from the original: the
    copy sits two levels down a mirror of the original's grandparent, whose other entries are
    links to the real ones."""
    scenarios = os.path.dirname(os.path.abspath(scenario))
    parent = os.path.dirname(scenarios)
    root = os.path.dirname(parent)
    mirror = os.path.join(work, "mirror")
    copy_dir = os.path.join(mirror, os.path.basename(parent), os.path.basename(scenarios))
    levels = ((root, mirror, parent), (parent, os.path.dirname(copy_dir), scenarios))
    for real, fake, skip in levels:
        os.makedirs(fake, exist_ok=True)
        for entry in os.listdir(real):
            link = os.path.join(fake, entry)
            if os.path.join(real, entry) != skip and not os.path.lexists(link):
                os.symlink(os.path.join(real, entry), link)
    os.makedirs(copy_dir, exist_ok=True)
    with open(scenario) as f:
        text = thinned(f.read(), keep)
    copy = os.path.join(copy_dir, os.path.basename(scenario))
    with open(copy, "w") as f:
        f.write(text)
    return copy


def check(loom, scenario, work, shots, sanitized):
    name = os.path.splitext(os.path.basename(scenario))[0]
    out = os.path.join(work, name)
    # Sanitized builds run several times slower (scripts/test --sanitize sets the scale).
    scale = float(os.environ.get("LOOM_TEST_TIME_SCALE", "1"))
    r = subprocess.run([loom, "replay", scenario, "--out", out], capture_output=True, text=True,
                       timeout=600 * scale)
    if r.returncode != 0:
        return None, f"{name}: replay exited {r.returncode}: {r.stderr.strip()}"
    if sanitized:
        return f"{name}: replayed (sanitized: {r.stdout.splitlines()[0] if r.stdout else ''})", None
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
    sanitized = sys.argv[3:] == ["--sanitized"]
    if not sanitized and not os.path.exists(CHROMIUM):
        print("chromium is not installed: scripts/bootstrap installs it", file=sys.stderr)
        return 1
    files = [os.path.join(scenarios, f) for f in sorted(os.listdir(scenarios))
             if f.endswith(".toml") and not (sanitized and f[:-5] in COVERED_BY)]
    for name, other in COVERED_BY.items():  # a renamed scenario must not hide the other
        if not os.path.exists(os.path.join(scenarios, other + ".toml")):
            print(f"{name} is skipped for {other}, which is not bundled", file=sys.stderr)
            return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="loom-report-") as work, \
            concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        files = [thinned_copy(f, work, SANITIZED if sanitized else PAGES) for f in files]
        for passed, problem in pool.map(lambda f: check(loom, f, work, shots, sanitized), files):
            if passed:
                print(passed, flush=True)
            else:
                failures.append(problem)
    for p in failures:
        print("FAIL " + p, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
