"""The rollout half of a GRPO iteration: G sampled responses per prompt from the rollout
policy's weights, each scored by the task's checker (DeepSeekMath §4.1: a group per question).

The rollout policy holds its own copy of the weights: it changes only when a sync delivers
the trainer's new weights, as in veRL and slime, where the inference engines are separate
from the training actors.
"""

import random
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch

from .config import ModelConfig
from .generate import sample
from .model import Decoder, Weights
from .tasks import Problem, problems, reward


@dataclass
class Group:
    """One prompt's G responses and their rewards; `index` is the prompt's place in its
    iteration's batch."""

    index: int
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

    def host_memory_gb(self) -> float:
        """What this policy holds between rollouts: its weights."""
        return sum(v.numel() * v.element_size() for v in self.decoder.w.values()) / 1e9

    def load(self, weights: Weights, version: int) -> None:
        """Takes synced weights (copied: the trainer goes on changing its own)."""
        self.decoder = Decoder(self.cfg, {k: v.detach().clone() for k, v in weights.items()})
        self.version = version

    def generate(self, batch: List[Tuple[int, Problem]], group: int,
                 seed_of: Callable[[int], int],
                 profile_length: Optional[int] = None) -> List[Group]:
        """Each (index, problem)'s group, sampled with a generator seeded by `seed_of(index)`
        alone: a prompt's responses do not depend on which worker drew it or what else it
        drew, so a rollout split over workers gives what one worker gives. A response may be
        as long as its problem's exact one; `profile_length` (a profiling pass): every
        response that long, past EOS too."""
        groups = []
        for index, p in batch:
            gen = torch.Generator().manual_seed(seed_of(index))
            responses = sample(self.decoder, [p.prompt_tokens()] * group,
                               profile_length or len(p.target()), gen,
                               to_max=profile_length is not None)
            groups.append(Group(index, p, responses, [reward(p, r) for r in responses]))
        return groups


def iteration_batch(task: str, digits: int, prompts: int, seed: int) -> List[Problem]:
    """An iteration's prompts, drawn from `seed` only (every worker draws the same)."""
    return problems(task, random.Random(seed), prompts, digits)
