"""The rollout half of a GRPO iteration: G sampled responses per prompt from the rollout
policy's weights, each scored by the task's checker (DeepSeekMath §4.1: a group per question).

The rollout policy holds its own copy of the weights: it changes only when a sync delivers
the trainer's new weights, as in veRL and slime, where the inference engines are separate
from the training actors.
"""

import random
from dataclasses import dataclass
from typing import List

import torch

from .config import ModelConfig
from .generate import sample
from .model import Decoder, Weights
from .tasks import Problem, problems, reward


@dataclass
class Group:
    """One prompt's G responses and their rewards."""

    problem: Problem
    responses: List[List[int]]
    rewards: List[float]

    @property
    def solved(self) -> float:
        return sum(1 for r in self.rewards if r == 1.0) / len(self.rewards)


class RolloutPolicy:
    """Generates with the last synced weights; `version` counts the syncs it has seen."""

    def __init__(self, cfg: ModelConfig, weights: Weights, version: int = 0):
        self.cfg = cfg
        self.load(weights, version)

    def load(self, weights: Weights, version: int) -> None:
        """Takes synced weights (copied: the trainer goes on changing its own)."""
        self.decoder = Decoder(self.cfg, {k: v.detach().clone() for k, v in weights.items()})
        self.version = version

    def generate(self, task: str, digits: int, prompts: int, group: int,
                 rng: random.Random, gen: torch.Generator) -> List[Group]:
        batch = problems(task, rng, prompts, digits)
        max_new = max(len(p.target()) for p in batch)
        flat = [p.prompt_tokens() for p in batch for _ in range(group)]
        out = sample(self.decoder, flat, max_new, gen)
        groups = []
        for i, p in enumerate(batch):
            responses = out[i * group:(i + 1) * group]
            groups.append(Group(p, responses, [reward(p, r) for r in responses]))
        return groups
