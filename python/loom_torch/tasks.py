"""Verifiable toy tasks for the GRPO job: each problem has one right answer, so the reward is
computed exactly by a checker, never by a learned model (the RLVR setting of DeepSeekMath's
GRPO and of veRL's and slime's math recipes, shrunk to what a CPU learns in minutes).

The reward is the fraction of the target (the answer's bytes, then EOS) that the response
matches position by position: 1.0 only for the exact answer that stops where it should, and
partial credit on the way there, which a 258-token policy from random weights needs to find
any signal in a few hundred samples.
"""

import random
from dataclasses import dataclass
from typing import Callable, Dict, List

from .tokenizer import EOS, encode


@dataclass(frozen=True)
class Problem:
    prompt: str
    answer: str

    def prompt_tokens(self) -> List[int]:
        return encode(self.prompt)

    def target(self) -> List[int]:
        """What an exact response is: the answer's bytes, then EOS."""
        return encode(self.answer, bos=False) + [EOS]


def reward(problem: Problem, response: List[int]) -> float:
    """Position-wise match of `response` against the problem's target, over the longer of
    the two: exact (and stopped) is 1.0, a wrong or unstopped answer less."""
    target = problem.target()
    hits = sum(1 for a, b in zip(target, response) if a == b)
    return hits / max(len(target), len(response))


def _add(rng: random.Random, digits: int) -> Problem:
    top = 10 ** digits
    a, b = rng.randrange(top), rng.randrange(top)
    return Problem(f"{a}+{b}=", str(a + b))


def _reverse(rng: random.Random, digits: int) -> Problem:
    s = "".join(rng.choice("0123456789") for _ in range(digits))
    return Problem(f"{s}>", s[::-1])


TASKS: Dict[str, Callable[[random.Random, int], Problem]] = {"add": _add, "reverse": _reverse}


def problems(task: str, rng: random.Random, n: int, digits: int) -> List[Problem]:
    """`n` problems of `task` with `digits`-digit operands, drawn from `rng` only."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: one of {', '.join(sorted(TASKS))}")
    return [TASKS[task](rng, digits) for _ in range(n)]
