#!/usr/bin/env python3
"""Replay against live on the reference engine (issue 44): does `loom replay`, given the
engine's own measured profile (`loom-engine-torch --profile`), predict the makespan of the
same generation step run live?

Live: `loom serve` with a deployment of two one-device engines (TP1 each: one CPU core per
engine process, as the profile measured them), the router starting one step of N prompts.
Replay: a generation scenario of the same deployment and profile whose trace is that step's
requests (prompt and output lengths as they ran), static-best (the only layout: TP1 x 2).
Prints both makespans and their ratio.

   bench_torch_replay.py LOOM_BINARY PYTHON_DIR [--prompts N] [--max-tokens M]"""

import json
import os
import random
import subprocess
import sys
import tempfile
import time

LOOM = sys.argv[1]
PACKAGE = sys.argv[2]
sys.path.insert(0, PACKAGE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))

from loom_client.client import Client  # noqa: E402
from loom_service import Service  # noqa: E402
from loom_torch.router import Router  # noqa: E402

PROMPTS = int(sys.argv[sys.argv.index("--prompts") + 1]) if "--prompts" in sys.argv else 48
MAX_TOKENS = (int(sys.argv[sys.argv.index("--max-tokens") + 1])
              if "--max-tokens" in sys.argv else 96)
ENV = dict(os.environ, PYTHONPATH=PACKAGE, OMP_NUM_THREADS="1")


def deployment(profile: str) -> str:
    return f"""[[generation.deployments]]
name = "gen"
model = "Qwen2.5-14B"
gpu = "H800"
gpus = 2
gpus_per_node = 1
initial = "TP1"
max_tokens = {MAX_TOKENS}
planner = false
balancer = false
tick_ms = 100
profile = "{profile}"
"""


def live(work: str, profile: str, batch: dict) -> tuple:
    """The step's makespan live, and each request's output length."""
    service = Service(LOOM, work, deployment(profile))
    engines = [subprocess.Popen([sys.executable, "-m", "loom_torch.engine", "--endpoint",
                                 service.endpoint, "--deployment", "gen", "--engine-id",
                                 f"e{k}", "--node", f"e{k}", "--gpus", "1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
               for k in range(2)]
    try:
        router = Router(Client(service.endpoint, timeout_s=60), "gen")
        time.sleep(3)  # both engines registered and built their instances
        started = time.monotonic()
        outputs = router.run_step(1, batch, timeout_s=600)
        took = time.monotonic() - started
        router.close()
    finally:
        for e in engines:
            e.terminate()
            e.wait(60)
        service.stop()
    return took, {i: len(o) for i, o in outputs.items()}


def replayed(work: str, profile: str, batch: dict, lengths: dict) -> float:
    """The same step replayed: its makespan from report.json."""
    trace = os.path.join(work, "step.csv")
    with open(trace, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for i, (prompt, _) in sorted(batch.items()):
            f.write(f"0,{len(prompt)},{lengths[i]}\n")
    scenario = os.path.join(work, "replay.toml")
    with open(scenario, "w") as f:
        f.write(f"""[scenario]
name = "torch-step"
kind = "generation"
policies = ["static-best"]
[deployment]
model = "Qwen2.5-14B"
gpu = "H800"
gpus = 2
gpus_per_node = 1
profile = "{profile}"
[balancer]
tick_s = 0.1
[workload]
steps = 1
batch = {len(batch)}
max_tokens = {MAX_TOKENS}
trace = "{trace}"
""")
    out = os.path.join(work, "replay")
    subprocess.run([LOOM, "replay", scenario, "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)["policies"]["static-best"]["step_makespans_s"][0]


def main() -> None:
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as work:
        profile = os.path.join(work, "profile.toml")
        subprocess.run([sys.executable, "-m", "loom_torch.engine", "--profile", profile,
                        "--gpus", "1", "--profile-model", "Qwen2.5-14B", "--profile-gpu",
                        "H800"], check=True, env=ENV, stdout=subprocess.DEVNULL)
        batch = {i: ([rng.randrange(1, 256) for _ in range(rng.randrange(16, 256))], MAX_TOKENS)
                 for i in range(PROMPTS)}
        os.makedirs(os.path.join(work, "live"))
        took, lengths = live(os.path.join(work, "live"), profile, batch)
        predicted = replayed(work, profile, batch, lengths)
        print(f"{PROMPTS} prompts, {sum(lengths.values())} tokens generated on 2 x TP1: live "
              f"makespan {took:.2f} s, replay with the engine's profile {predicted:.2f} s, "
              f"replay/live {predicted / took:.3f}")


if __name__ == "__main__":
    main()
