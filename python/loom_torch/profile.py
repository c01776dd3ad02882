"""`loom-engine-torch --profile`: the engine's own step times, written as Loom's engine profile
(docs/scenarios.md "Engine profiles"), so that a deployment of this engine plans on what it
measured instead of a roofline or a fit to a paper's numbers (OrchestrRL §4.2 plans on
offline-profiled step times).

For each TP degree the engine's devices can run, a batch of B requests is prefilled to c tokens
each and decode steps are timed through the instance's forward, the path Batcher.step takes
on every rank (its own bookkeeping is ~1% of a step: bench/bench_torch.py). The grid varies B
and the batch's context C = B x c independently, as Loom's least-squares fit needs; it should
reach the batches and contexts the engine will run (its --max-batch), since the fit is a line.
Prefill throughput and the KV capacity in tokens come from the same runs and the engine's budget.
"""

import argparse
import statistics
import time
from typing import Dict, List, Tuple

import torch

from .config import ModelConfig
from .instance import Instance

STEPS = 9  # decode steps timed per point (their median)


def degrees(cfg: ModelConfig, devices: int) -> List[int]:
    """The TP degrees an engine of `devices` runs: those the model's heads divide into."""
    out = []
    for tp in range(1, devices + 1):
        try:
            cfg.validate(tp)
        except ValueError:
            continue
        out.append(tp)
    return out


def measure(instance: Instance, batch: int, context: int) -> Tuple[float, float]:
    """(median decode step in ms, prefill tokens per second) for `batch` requests holding
    `context` tokens each."""
    gen = torch.Generator().manual_seed(batch * 100_003 + context)
    vocab = instance.cfg.vocab
    prompts = torch.randint(1, vocab, (batch, context), generator=gen).tolist()
    feeds = list(enumerate(prompts))
    started = time.perf_counter()
    last = instance.forward(feeds).argmax(-1).tolist()
    prefill_s = time.perf_counter() - started
    times = []
    for _ in range(STEPS):
        started = time.perf_counter()
        last = instance.forward([(i, [t]) for i, t in enumerate(last)]).argmax(-1).tolist()
        times.append(time.perf_counter() - started)
    instance.drop(list(range(batch)))
    return statistics.median(times) * 1e3, batch * context / prefill_s


def profile(cfg: ModelConfig, seed: int, devices: int, device: str, kv_tokens: Dict[int, int],
            batches: List[int], contexts: List[int]) -> Dict[int, dict]:
    """Per TP degree: the samples over batches x contexts (tokens per request) and the prefill
    rate (the median over the grid)."""
    out = {}
    for tp in degrees(cfg, devices):
        instance = Instance(cfg, seed, tp=tp, device=device)
        try:
            samples = {"batch": [], "context_tokens": [], "step_ms": []}
            rates = []
            for b in batches:
                for c in contexts:
                    step_ms, rate = measure(instance, b, c)
                    samples["batch"].append(b)
                    samples["context_tokens"].append(b * c)
                    samples["step_ms"].append(round(step_ms, 4))
                    rates.append(rate)
        finally:
            instance.close()
        out[tp] = dict(samples, prefill_tokens_per_s=round(statistics.median(rates)),
                       kv_tokens=kv_tokens[tp])
    return out


def render(measured: Dict[int, dict], a: argparse.Namespace, cfg: ModelConfig) -> str:
    """The profile TOML: [profile] names what it was measured for; one [[config]] per TP."""
    lines = ["# Decode step times measured by `loom-engine-torch --profile`: median of "
             f"{STEPS} steps per point,",
             "# B requests of c context tokens each (context_tokens = B x c); Loom fits "
             "step_ms = fixed + per_request x B + per_kilotoken x C / 1000.",
             "", "[profile]", f'model = "{a.profile_model}"', f'gpu = "{a.profile_gpu}"',
             f'source = "loom-engine-torch --profile on {a.device}, torch {torch.__version__}, '
             f'{cfg.layers} layers x {cfg.hidden}"']
    for tp, m in sorted(measured.items()):
        lines += ["", "[[config]]", f'parallel = "TP{tp}"']
        for key in ("batch", "context_tokens", "step_ms"):
            lines.append(f"{key} = [{', '.join(str(v) for v in m[key])}]")
        lines += [f"prefill_tokens_per_s = {m['prefill_tokens_per_s']}",
                  f"kv_tokens = {m['kv_tokens']}"]
    return "\n".join(lines) + "\n"


def write_profile(a: argparse.Namespace, cfg: ModelConfig, kv_tokens: Dict[int, int]) -> None:
    """Measures every TP degree of this engine and writes the profile to `a.profile`."""
    torch.set_num_threads(1)
    text = render(profile(cfg, a.seed, a.gpus, a.device, kv_tokens, a.profile_batches,
                          a.profile_contexts), a, cfg)
    with open(a.profile, "w") as f:
        f.write(text)
    print(f"profile of {len(degrees(cfg, a.gpus))} TP degrees written to {a.profile}", flush=True)
