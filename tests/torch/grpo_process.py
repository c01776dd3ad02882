"""`python3 -m loom_torch.grpo` as the torch suites run it: a real process whose JSON lines
are parsed as they come."""

import json
import os
import subprocess
import sys
import threading
from typing import Dict, List

from loom_service import SCALE

LIMIT_S = 240 * SCALE  # for one process to report an iteration, or to end

# What an iteration learnt, without its timings (which no two runs share).
LEARNT = ("iteration", "reward", "solved", "loss", "clipped", "weights_version", "sync_bytes",
          "rollout_tokens")


class Grpo:
    """One `python3 -m loom_torch.grpo` process. Its stdout's JSON lines and its stderr are
    read as they come by threads of their own, so that no pipe ever fills and blocks it.
    `package`: the folder holding loom_torch and loom_client (set by the test)."""

    package = ""
    started: List["Grpo"] = []

    def __init__(self, *args: str, env: Dict[str, str] = None):
        full = dict(os.environ, PYTHONPATH=self.package, OMP_NUM_THREADS="1", **(env or {}))
        if "LOOM_ENDPOINT" not in (env or {}):
            full.pop("LOOM_ENDPOINT", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "loom_torch.grpo", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=full)
        Grpo.started.append(self)
        self.records: List[dict] = []
        self._errors: List[str] = []
        self._changed = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, True)),
                         threading.Thread(target=self._read, args=(self.proc.stderr, False))]
        for t in self._readers:
            t.daemon = True
            t.start()

    def _read(self, pipe, records: bool) -> None:
        for line in pipe:
            with self._changed:
                if records:
                    self.records.append(json.loads(line))
                else:
                    self._errors.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        """Its stderr's last lines and its last JSON lines (a job_ended says why)."""
        with self._changed:
            return "".join(self._errors[-200:]) + f"last records: {self.records[-3:]}"

    def until(self, iteration: int) -> None:
        """Waits until `iteration` has been reported."""
        def reported() -> bool:
            return any(r.get("iteration") == iteration and "reward" in r for r in self.records)
        with self._changed:
            done = self._changed.wait_for(
                lambda: reported() or not self._readers[0].is_alive(), timeout=LIMIT_S)
            if not (done and reported()):
                raise AssertionError(f"no iteration {iteration}: {self.stderr}")

    def finish(self) -> int:
        """Its exit status; a process still running after the limit is killed and named."""
        try:
            self.proc.wait(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"{self.proc.args[3:]} still ran after {LIMIT_S:.0f} s; last "
                                 f"records {self.records[-3:]}; stderr {self.stderr}")
        for t in self._readers:
            t.join()
        return self.proc.returncode

    @classmethod
    def said(cls) -> str:
        """Every started process's arguments and stderr: a failed test shows what each worker
        said (a rollout worker's traceback, not only the trainer's silence)."""
        return "".join(f"\n{' '.join(g.proc.args[3:])}:\n{g.stderr}" for g in cls.started)

    @classmethod
    def kill_all(cls) -> None:
        """Kills what a failed test left running, so that it holds no cores afterwards."""
        for g in cls.started:
            if g.proc.poll() is None:
                g.proc.kill()
                g.proc.wait()
        cls.started.clear()

    def iterations(self) -> Dict[int, dict]:
        return {r["iteration"]: {k: r[k] for k in LEARNT} for r in self.records
                if "reward" in r}


def run(*args: str, env: Dict[str, str] = None) -> Grpo:
    g = Grpo(*args, env=env)
    rc = g.finish()
    assert rc == 0, g.stderr
    return g
