"""What every role of the GRPO job shares: the trainable policy with its last finished
iteration and checkpoint (`Learner`), the seeds every draw comes from, a worker's share of an
iteration's rollout, and the JSON line an iteration prints.

Every draw is seeded by (seed, iteration, prompt) alone, so an iteration run again after a
restart, or split over other workers, computes exactly what it computed the first time.
"""

import argparse
import copy
import json
import os
import random
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import torch

from loom_client import Restarted

from .config import ModelConfig
from .base_model import base_weights
from .model import Weights
from .rollout import Group, RolloutPolicy, iteration_batch
from .tasks import longest_response
from .trainer import Trainer

CHECKPOINT = "grpo.pt"


def seed_for(seed: int, iteration: int, index: int = 0) -> int:
    """The seed of one draw: the iteration's batch (index 0) or one prompt's group."""
    return ((seed * 1_000_003 + iteration) * 1_009 + index) % (1 << 62)


@dataclass
class Progress:
    """What a checkpoint restores: iterations done, the policy's weights and AdamW's state."""

    iteration: int
    weights: Weights
    optimizer: Dict[str, Any]

    def save(self, folder: str) -> None:
        """Atomically (write, then rename): a kill mid-save leaves the previous one."""
        path = os.path.join(folder, CHECKPOINT)
        torch.save(self.__dict__, path + ".tmp")
        os.replace(path + ".tmp", path)

    @staticmethod
    def load(folder: str) -> Optional["Progress"]:
        path = os.path.join(folder, CHECKPOINT)
        return Progress(**torch.load(path)) if os.path.exists(path) else None


def model_config(a: argparse.Namespace) -> ModelConfig:
    return ModelConfig(layers=a.layers, hidden=a.hidden, heads=4, kv_heads=2, ffn=2 * a.hidden)


class Learner:
    """The trainable policy of the driver and train roles, with its last finished iteration."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        cfg = model_config(a)
        # A checkpoint's weights replace the start (resume()): no base model to train then.
        resuming = bool(a.checkpoint) and os.path.exists(os.path.join(a.checkpoint, CHECKPOINT))
        start = base_weights(cfg, a.task, a.digits, a.seed, 0 if resuming else a.base_steps)
        self.trainer = Trainer(cfg, start, a.lr, minibatches=a.minibatches)
        self.iteration = 0
        self.last = self.snapshot()

    def snapshot(self) -> Progress:
        return Progress(self.iteration, copy.deepcopy(self.trainer.state()),
                        copy.deepcopy(self.trainer.optimizer.state_dict()))

    def restore(self, p: Progress) -> None:
        with torch.no_grad():
            for k, v in p.weights.items():
                self.trainer.weights[k].copy_(v)
        self.trainer.optimizer.load_state_dict(p.optimizer)
        self.iteration = p.iteration

    def resume(self) -> None:
        """From the checkpoint folder, if it holds one."""
        if not self.a.checkpoint:
            return
        os.makedirs(self.a.checkpoint, exist_ok=True)
        saved = Progress.load(self.a.checkpoint)
        if saved is not None:
            self.restore(saved)
            self.last = saved
            say({"event": "resumed", "iteration": self.iteration})

    def rewind(self, e: Restarted) -> None:
        """Loom did not count the iteration: back to the last finished one."""
        self.restore(self.last)
        say({"event": "restarted", "iteration": self.iteration, "reason": e.message})

    def train(self, groups: List[Group], profiling: bool = False) -> Dict[str, float]:
        """The iteration's update; its stats carry `host_memory_gb`, what training holds
        between turns (AdamW's moments included). A profiling pass (WEAVE §5 (1)) trains on
        every sample and then puts the policy and AdamW back as they were: nothing is kept."""
        if not profiling:
            stats = self.trainer.update(groups,
                                        random.Random(seed_for(self.a.seed, self.iteration + 1)))
            return dict(stats, host_memory_gb=self.trainer.host_memory_gb())
        before = self.snapshot()
        stats = self.trainer.update(groups, random.Random(seed_for(self.a.seed, 0)),
                                    every_sample=True)
        stats["host_memory_gb"] = self.trainer.host_memory_gb()
        self.restore(before)
        return stats

    def finished(self) -> None:
        """The iteration is synced: count it and keep it."""
        self.iteration += 1
        self.last = self.snapshot()
        if self.a.checkpoint:
            self.last.save(self.a.checkpoint)


def rollout_share(a: argparse.Namespace, policy: RolloutPolicy, iteration: int, rank: int,
                  workers: int, to_max: bool = False) -> List[Group]:
    """This worker's part of the iteration's groups: prompts rank, rank + workers, ...
    `to_max`: every response at the task's maximum length, not this batch's (a profiling
    pass: WEAVE §5 (1)'s worst case holds for every batch the job will draw)."""
    batch = iteration_batch(a.task, a.digits, a.prompts, seed_for(a.seed, iteration))
    mine = [(i, p) for i, p in enumerate(batch) if i % workers == rank]
    longest = longest_response(a.task, a.digits) if to_max else None
    return policy.generate(mine, a.group, lambda i: seed_for(a.seed, iteration, i + 1), longest)


def record(iteration: int, groups: List[Group], stats: Dict[str, float], version: int,
           moved: int, times: List[float], gpus: int) -> Dict[str, Any]:
    rewards = [r for g in groups for r in g.rewards]
    return {"iteration": iteration, "reward": round(sum(rewards) / len(rewards), 4),
            "solved": round(sum(g.solved for g in groups) / len(groups), 4),
            "loss": round(stats["loss"], 5), "clipped": round(stats["clipped"], 4),
            "weights_version": version, "sync_bytes": moved, "rollout_gpus": gpus,
            "rollout_tokens": response_tokens(groups),
            "rollout_s": round(times[1] - times[0], 3), "training_s": round(times[2] - times[1], 3),
            "sync_s": round(times[3] - times[2], 3)}


def response_tokens(groups: List[Group]) -> int:
    """The tokens a rollout generated: the work its time is a worst case of when profiled."""
    return sum(len(r) for g in groups for r in g.responses)


def profiled(times: List[float], groups: List[Group], rollout: Any,
             training: Any) -> Dict[str, Any]:
    """The line a profiling pass prints: what it measured (Loom measured the same)."""
    return {"event": "profiled", "rollout_s": round(times[1] - times[0], 3),
            "rollout_tokens": response_tokens(groups),
            "training_s": round(times[2] - times[1], 3), "sync_s": round(times[3] - times[2], 3),
            "rollout_memory_gb": rollout.host_memory_gb,
            "training_memory_gb": training.host_memory_gb}


def say(line: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()


def nbytes(weights: Weights) -> int:
    return sum(v.numel() * v.element_size() for v in weights.values())
