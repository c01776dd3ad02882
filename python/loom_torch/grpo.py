"""A GRPO job that learns, on Loom's Job API only: python3 -m loom_torch.grpo.

Each iteration is the loop veRL's `RayPPOTrainer.fit()` and slime's train loop run, one Loom
phase per stage (WEAVE §5.1's run permits):
    with job.phase("rollout"):   groups = rollout.generate(...)        # veRL generate_sequences
    with job.phase("training"):  trainer.update(groups)                # compute_log_prob, update_actor
    with job.phase("sync"):      rollout.load(trainer.state())         # weight sync to the engines
then a checkpoint, so a job Loom restarts or moves (Restarted, a process killed and started
again) resumes from its last finished iteration with the same random state, and learns what
it would have learnt uninterrupted.

Configured like any worker, from LOOM_ENDPOINT, LOOM_SERVER_KEY, LOOM_KEY and LOOM_JOB; without
LOOM_ENDPOINT it runs unscheduled. Prints one JSON line per iteration.
"""

import argparse
import copy
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import torch

from loom_client import Job, JobEnded, Restarted

from .config import ModelConfig
from .model import init_weights
from .rollout import Group, RolloutPolicy
from .tasks import TASKS
from .trainer import Trainer

CHECKPOINT = "grpo.pt"


@dataclass
class Progress:
    """What a checkpoint restores: iterations done, the trainer's weights and optimizer, the
    rollout's weights version and every random state."""

    iteration: int
    weights: Dict[str, torch.Tensor]
    optimizer: Dict[str, Any]
    rng: Any
    gen: torch.Tensor

    def save(self, folder: str) -> None:
        """Atomically (write, then rename): a kill mid-save leaves the previous one."""
        path = os.path.join(folder, CHECKPOINT)
        torch.save(self.__dict__, path + ".tmp")
        os.replace(path + ".tmp", path)

    @staticmethod
    def load(folder: str) -> Optional["Progress"]:
        path = os.path.join(folder, CHECKPOINT)
        return Progress(**torch.load(path)) if os.path.exists(path) else None


class GrpoJob:
    """One job's policy, its rollout copy and the random state they draw from."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.cfg = ModelConfig(layers=a.layers, hidden=a.hidden, heads=4, kv_heads=2,
                               ffn=2 * a.hidden)
        weights = init_weights(self.cfg, a.seed)
        self.trainer = Trainer(self.cfg, weights, a.lr, minibatches=a.minibatches)
        self.rollout = RolloutPolicy(self.cfg, weights)
        self.rng = random.Random(a.seed)
        self.gen = torch.Generator().manual_seed(a.seed)
        self.iteration = 0

    def snapshot(self) -> Progress:
        return Progress(self.iteration, copy.deepcopy(self.trainer.state()),
                        copy.deepcopy(self.trainer.optimizer.state_dict()),
                        self.rng.getstate(), self.gen.get_state())

    def restore(self, p: Progress) -> None:
        with torch.no_grad():
            for k, v in p.weights.items():
                self.trainer.weights[k].copy_(v)
        self.trainer.optimizer.load_state_dict(p.optimizer)
        self.rollout.load(self.trainer.state(), p.iteration)
        self.rng.setstate(p.rng)
        self.gen.set_state(p.gen)
        self.iteration = p.iteration

    def run_iteration(self, job: Job) -> Dict[str, Any]:
        a, t0 = self.a, time.monotonic()
        with job.phase("rollout") as rollout:
            groups = self.rollout.generate(a.task, a.digits, a.prompts, a.group, self.rng,
                                           self.gen)
            job.progress(len(groups), a.prompts)
        t1 = time.monotonic()
        with job.phase("training"):
            stats = self.trainer.update(groups, self.rng)
        t2 = time.monotonic()
        with job.phase("sync"):
            state = self.trainer.state()
            self.rollout.load(state, self.iteration + 1)
            moved = sum(v.numel() * v.element_size() for v in state.values())
        t3 = time.monotonic()
        self.iteration += 1
        return {"iteration": self.iteration, "reward": round(mean_reward(groups), 4),
                "solved": round(sum(g.solved for g in groups) / len(groups), 4),
                "loss": round(stats["loss"], 5), "clipped": round(stats["clipped"], 4),
                "weights_version": self.rollout.version, "sync_bytes": moved,
                "rollout_gpus": rollout.gpus, "rollout_s": round(t1 - t0, 3),
                "training_s": round(t2 - t1, 3), "sync_s": round(t3 - t2, 3)}


def mean_reward(groups: List[Group]) -> float:
    rewards = [r for g in groups for r in g.rewards]
    return sum(rewards) / len(rewards)


def say(record: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
    sys.stdout.flush()


def train(a: argparse.Namespace, job: Job) -> int:
    """Runs iterations until `a.iterations` are done; returns the exit status."""
    run = GrpoJob(a)
    if a.checkpoint:
        os.makedirs(a.checkpoint, exist_ok=True)
        saved = Progress.load(a.checkpoint)
        if saved is not None:
            run.restore(saved)
            say({"event": "resumed", "iteration": run.iteration})
    last = run.snapshot()
    while run.iteration < a.iterations:
        try:
            record = run.run_iteration(job)
        except Restarted as e:
            run.restore(last)  # the iteration runs again from its rollout, as it would have
            say({"event": "restarted", "iteration": run.iteration, "reason": e.message})
            continue
        last = run.snapshot()
        if a.checkpoint:
            last.save(a.checkpoint)
        say(record)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m loom_torch.grpo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=sorted(TASKS), default="reverse")
    p.add_argument("--digits", type=int, default=1, help="digits per operand")
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prompts", type=int, default=16, help="prompts per iteration")
    p.add_argument("--group", type=int, default=8, help="samples per prompt (GRPO's G)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--minibatches", type=int, default=2, help="optimizer steps per iteration")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--checkpoint", help="folder of the checkpoint written after every sync")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    job = Job(role="driver")
    try:
        status = train(a, job)
        job.finish()
        return status
    except JobEnded as e:
        say({"event": "job_ended", "reason": e.message})
        job.close(e.message)
        return 1


if __name__ == "__main__":
    sys.exit(main())
