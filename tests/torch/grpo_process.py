"""`python3 -m loom_torch.grpo` as the torch suites run it: a real process whose JSON lines
are parsed as they come."""

import json
import os
import subprocess
import sys
from typing import Dict, List

from loom_service import SCALE

# What an iteration learnt, without its timings (which no two runs share).
LEARNT = ("iteration", "reward", "solved", "loss", "clipped", "weights_version", "sync_bytes")


class Grpo:
    """One `python3 -m loom_torch.grpo` process; its JSON lines are parsed as they come.
    `package`: the folder holding loom_torch and loom_client (set by the test)."""

    package = ""

    def __init__(self, *args: str, env: Dict[str, str] = None):
        full = dict(os.environ, PYTHONPATH=self.package, OMP_NUM_THREADS="1", **(env or {}))
        if "LOOM_ENDPOINT" not in (env or {}):
            full.pop("LOOM_ENDPOINT", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "loom_torch.grpo", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=full)
        self.records: List[dict] = []

    def until(self, iteration: int) -> None:
        """Reads records until `iteration` has been reported."""
        for line in self.proc.stdout:
            self.records.append(json.loads(line))
            if self.records[-1].get("iteration") == iteration and "reward" in self.records[-1]:
                return
        raise AssertionError(f"ended before iteration {iteration}: {self.proc.stderr.read()}")

    def finish(self) -> int:
        out, err = self.proc.communicate(timeout=600 * SCALE)
        self.records += [json.loads(line) for line in out.splitlines()]
        self.stderr = err
        return self.proc.returncode

    def iterations(self) -> Dict[int, dict]:
        return {r["iteration"]: {k: r[k] for k in LEARNT} for r in self.records
                if "reward" in r}


def run(*args: str, env: Dict[str, str] = None) -> Grpo:
    g = Grpo(*args, env=env)
    rc = g.finish()
    assert rc == 0, g.stderr
    return g
