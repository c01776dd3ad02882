"""Real work obeys Loom: `loom serve`, two `loom-engine-torch` engines of two devices each (CPU
worker processes), and the router, all real processes on loopback. Every output is checked
token for token against the same model decoding each prompt alone, unmigrated.

   test_live.py LOOM_BINARY PYTHON_PACKAGE_DIR"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import Dict, List, Optional

LOOM = sys.argv.pop(1) if len(sys.argv) > 2 else os.environ.get("LOOM_BIN", "build/loom")
PACKAGE = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "python")
sys.path.insert(0, PACKAGE)

import torch  # noqa: E402

from loom_client.client import Client  # noqa: E402
from loom_torch import Decoder, ModelConfig, init_weights  # noqa: E402
from loom_torch.generate import greedy  # noqa: E402
from loom_torch.router import Router  # noqa: E402
from loom_torch.tokenizer import encode  # noqa: E402
from loom_service import SCALE, Service  # noqa: E402

SEED = 3
LONG = 320  # tokens of a long request: its instance straggles for many monitoring ticks
CFG = ModelConfig()  # the engine's defaults
LIMIT_S = 300 * SCALE


def deployment(initial: str, balancer: bool, profile: str) -> str:
    """Two engines of two devices; no planner (the test's operator switches layouts); the step
    times the forecast and balancer read are the engine's own (`--profile`)."""
    return f"""
[[generation.deployments]]
name = "gen"
model = "Qwen2.5-14B"
gpu = "H800"
gpus = 4
gpus_per_node = 2
initial = "{initial}"
max_tokens = 512
planner = false
balancer = {str(balancer).lower()}
theta = 0.01
tick_ms = 100
command_timeout_s = {5 * SCALE}
profile = "{profile}"
"""


class Engine:
    """A `loom-engine-torch` process; its stdout lines are collected."""

    def __init__(self, service: Service, engine_id: str):
        env = dict(os.environ, PYTHONPATH=PACKAGE, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loom_torch.engine", "--endpoint", service.endpoint,
             "--deployment", "gen", "--engine-id", engine_id, "--node", engine_id,
             "--gpus", "2", "--seed", str(SEED)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    def admitted(self, what: str) -> int:
        """Requests admitted `with their KV`, `recomputed` (from their tokens) or `from
        prompts`, as the engine's admit lines count them."""
        return sum(int(m.group(1)) for line in self.lines
                   for m in [re.search(r"(\d+) " + what, line)] if m)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def prompts(n: int, long_every: int = 0) -> Dict[int, tuple]:
    """n prompts of different lengths; every `long_every`-th is a long document asking for
    many more tokens (its context makes moving its KV cheaper than recomputing it, App. A)."""
    out = {}
    for i in range(n):
        long = long_every and i % long_every == 0
        text = f"req {i}: " + "abcdefgh"[: i % 8] + ("lorem ipsum " * 80 if long else "")
        out[i] = (encode(text), LONG if long else 8 + i % 5)
    return out


_REFERENCE = Decoder(CFG, init_weights(CFG, SEED))


def reference(batch: Dict[int, tuple]) -> Dict[int, List[int]]:
    """Each prompt decoded greedily alone: what no scheduling may change."""
    return {i: greedy(_REFERENCE, [p], n)[0] for i, (p, n) in batch.items()}


def identical_share(got: Dict[int, List[int]], want: Dict[int, List[int]]) -> float:
    same = total = 0
    for i, w in want.items():
        g = got.get(i, [])
        total += max(len(w), len(g))
        same += sum(a == b for a, b in zip(g, w))
    return same / max(total, 1)


class StepThread(threading.Thread):
    """A router's step running while the test acts on the service or the engines."""

    def __init__(self, router: Router, step: int, batch: Dict[int, tuple]):
        super().__init__(daemon=True)
        self.router, self.step, self.batch = router, step, batch
        self.outputs: Dict[int, List[int]] = {}
        self.error = None
        self.start()

    def run(self):
        try:
            self.outputs = self.router.run_step(self.step, self.batch, timeout_s=LIMIT_S)
        except Exception as e:  # noqa: BLE001 - reported by the test that joins it
            self.error = e

    def result(self) -> Dict[int, List[int]]:
        self.join(LIMIT_S)
        assert not self.is_alive(), f"step {self.step} never ended"
        assert self.error is None, self.error
        return self.outputs


def measure_profile(folder: str) -> str:
    """`loom-engine-torch --profile` for the engines' model and two devices: the profile file."""
    path = os.path.join(folder, "profile.toml")
    out = subprocess.run([sys.executable, "-m", "loom_torch.engine", "--profile", path,
                          "--gpus", "2", "--seed", str(SEED), "--profile-model", "Qwen2.5-14B",
                          "--profile-gpu", "H800", "--profile-batches", "1", "4", "16",
                          "--profile-contexts", "32", "128", "384"],
                         env=dict(os.environ, PYTHONPATH=PACKAGE, OMP_NUM_THREADS="1"),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return path


class TorchLive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.profiles = tempfile.mkdtemp(prefix="loom-torch-profile-")
        cls.profile = measure_profile(cls.profiles)

    def test_the_engine_profiles_itself_for_every_tp_degree_and_loom_takes_it(self):
        """Its step times per TP degree its devices run, samples varying the batch and its
        context apart, in the file format `serve` reads (every test here serves on it)."""
        with open(self.profile) as f:
            text = f.read()
        self.assertEqual(re.findall(r'parallel = "(\w+)"', text), ["TP1", "TP2"])
        for key in ("batch", "context_tokens", "step_ms"):
            rows = re.findall(rf"^{key} = \[(.*)\]$", text, re.M)
            self.assertEqual([len(r.split(",")) for r in rows], [9, 9], key)
        batches = {int(b) for b in re.findall(r"^batch = \[(.*)\]$", text, re.M)[0].split(",")}
        self.assertGreater(len(batches), 1)
        config = os.path.join(self.profiles, "loom.toml")
        Service.write_config(config, os.path.join(self.profiles, "db"), "tcp://127.0.0.1:1",
                             deployment("TP1", False, self.profile))
        out = subprocess.run([LOOM, "check-config", config], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def setUp(self):
        torch.set_num_threads(1)
        self.work = tempfile.mkdtemp(prefix="loom-torch-live-")
        self.engines: List[Engine] = []
        self.service = None
        self.router = None

    def tearDown(self):
        if self.router:
            self.router.close()
        for e in self.engines:
            e.stop()
        if self.service:
            self.service.stop()
            self.service.log.close()
        shutil.rmtree(self.work, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.profiles, ignore_errors=True)

    def start(self, initial: str, balancer: bool = False):
        self.service = Service(LOOM, self.work, deployment(initial, balancer, self.profile))
        self.engines = [Engine(self.service, f"e{k}") for k in range(2)]
        self.wait_for(lambda: all(e.count("reshard: ok") for e in self.engines),
                      "both engines loaded their first instances")
        self.router = Router(Client(self.service.endpoint, timeout_s=60 * SCALE), "gen")

    def wait_for(self, done, what: str) -> None:
        until = time.monotonic() + 60 * SCALE
        while not done():
            self.assertLess(time.monotonic(), until,
                            f"{what}: not in time; engines: {[e.lines for e in self.engines]}")
            time.sleep(0.01)

    def step_admitted(self, step: int, instance: Optional[int] = None) -> None:
        """Waits until an engine logged admitting requests of `step` (on `instance`: the
        engines' lines arrive each on its own pipe, in no order between them)."""
        text = f"of step {step} " + ("" if instance is None else f"on instance {instance}:")
        self.wait_for(lambda: any(e.count(text) for e in self.engines),
                      f"step {step} admitted" + ("" if instance is None else f" on {instance}"))

    def test_an_operator_switches_tp1_to_tp2_to_tp4_over_both_engines_and_back(self):
        self.start("TP1")
        batch = prompts(12, long_every=3)
        want = reference(batch)
        self.assertEqual(self.router.run_step(0, batch, LIMIT_S), want)  # TP1: token for token
        for e in self.engines:
            self.assertGreater(e.admitted("from prompts"), 0, e.lines)
        # Mid-step: drain, reshard to one TP2 instance per engine (two processes each), and
        # the requests recomputed from the tokens they had.
        running = StepThread(self.router, 1, batch)
        self.step_admitted(1)
        self.service.admin("generation", "reconfigure", "gen", "TP2")
        got = running.result()
        g = self.service.generation()
        self.assertEqual(g["current"], "2xTP2")
        self.assertEqual(g["reconfigurations"], 1)
        self.assertGreater(sum(e.admitted("recomputed") for e in self.engines), 0)
        share = identical_share(got, want)
        print(f"TP1 -> TP2 mid-step: {share:.4f} of the tokens as unmigrated TP1", flush=True)
        self.assertGreaterEqual(share, 0.99)
        # Mid-step again, to one TP4 instance wider than either engine: e0 leads it with ranks
        # 0-1, e1 starts ranks 2-3 at e0's rendezvous (OrchestrRL's cross-node TP).
        running = StepThread(self.router, 2, batch)
        self.step_admitted(2)
        self.service.admin("generation", "reconfigure", "gen", "TP4")
        got = running.result()
        self.assertEqual(self.service.generation()["current"], "1xTP4")
        lead, follower = sorted(self.engines, key=lambda e: e.count("ranks 2-3 of TP4 join"))
        self.assertEqual(follower.count("ranks 2-3 of TP4 join"), 1, follower.lines)
        self.assertGreater(lead.admitted("recomputed"), 0)
        share = identical_share(got, want)
        print(f"TP2 -> TP4 over both engines mid-step: {share:.4f} of the tokens as unmigrated "
              "TP1", flush=True)
        self.assertGreaterEqual(share, 0.99)
        # Back to TP1 between steps: token for token again.
        self.service.admin("generation", "reconfigure", "gen", "TP1")
        self.wait_for(lambda: self.service.generation()["reconfiguring"] == "",
                      "the switch back")
        self.assertEqual(self.router.run_step(3, batch, LIMIT_S), want)
        self.assertEqual(self.service.generation()["current"], "4xTP1")

    def test_a_straggler_moves_its_kv_and_an_engine_killed_mid_step_loses_no_output(self):
        self.start("TP1", balancer=True)
        batch = prompts(16, long_every=4)  # the long ones all land on instance 0
        want = reference(batch)
        self.assertEqual(self.router.run_step(0, batch, LIMIT_S), want)
        g = self.service.generation()
        print(f"balancer: {g['migrations']} migrations, {g['kv_transfers']} KV transfers, "
              f"{g['kv_recomputes']} recomputed", flush=True)
        self.assertGreater(g["kv_transfers"], 0)  # the long contexts' caches moved
        self.assertGreater(sum(e.admitted("with their KV") for e in self.engines), 0)
        # Kill the engine leading the long requests while step 1 runs: its requests start again
        # from their prompts on the other one.
        running = StepThread(self.router, 1, batch)
        self.step_admitted(1, instance=0)
        victim = next(e for e in self.engines if e.count("of step 1 on instance 0:"))
        victim.proc.kill()
        self.assertEqual(running.result(), want)
        self.assertEqual(victim.proc.wait(30), -signal.SIGKILL)
        self.wait_for(lambda: self.service.generation()["engines_lost"] == 1, "the engine lost")

    def test_serve_killed_mid_step_resumes_it_and_the_outputs_hold(self):
        self.start("TP2")
        batch = prompts(8, long_every=2)
        want = reference(batch)
        running = StepThread(self.router, 0, batch)
        self.step_admitted(0)
        self.service.kill()
        self.assertTrue(running.is_alive())
        self.service.start()
        share = identical_share(running.result(), want)
        print(f"TP2 across a serve restart: {share:.4f} of the tokens as unmigrated TP1",
              flush=True)
        self.assertGreaterEqual(share, 0.99)


if __name__ == "__main__":
    unittest.main(verbosity=2)
