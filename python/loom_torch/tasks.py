"""Verifiable toy tasks for the GRPO job: each problem has one right answer, so the reward is
computed exactly by a checker, never by a learned model (the RLVR setting of DeepSeekMath's
GRPO and of veRL's and slime's math recipes, shrunk to what a CPU learns in minutes).

The reward is the share of the target (the answer's bytes, then EOS) that the response gets
right from its start: 1.0 only for the exact answer that stops where it should, partial credit
for a right beginning, none for a right stop after a wrong answer. Credit for matches anywhere
(the stop included) paid a policy for stopping after any byte, and GRPO collapsed onto one
wrong answer that stops (reward 0.5, nothing left to learn from).

The policy starts from a base model that knows the answers' form (`answer_form`), as RLVR
starts from a pretrained one: a random 258-token policy samples a right digit once in 258
tries, a base model once in ten.
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
    """The length of the target's prefix that `response` starts with, over the longer of the
    two: exact (and stopped) is 1.0, a wrong or unstopped answer less."""
    target = problem.target()
    right = 0
    while right < min(len(target), len(response)) and target[right] == response[right]:
        right += 1
    return right / max(len(target), len(response))


def answer_form(problem: Problem, rng: random.Random) -> List[int]:
    """A response of the right form with random content: as many digits as the answer has,
    then EOS. What a base model has seen of answers, never which one is right."""
    return encode("".join(rng.choice("0123456789") for _ in problem.answer), bos=False) + [EOS]


def _add(rng: random.Random, digits: int) -> Problem:
    top = 10 ** digits
    a, b = rng.randrange(top), rng.randrange(top)
    return Problem(f"{a}+{b}=", str(a + b))


def _reverse(rng: random.Random, digits: int) -> Problem:
    s = "".join(rng.choice("0123456789") for _ in range(digits))
    return Problem(f"{s}>", s[::-1])


@dataclass(frozen=True)
class Task:
    """How a task's problems are drawn, and how long its longest answer is (in digits, at
    `digits`-digit operands): the maximum response length WEAVE's profiling pass generates
    (§5 (1)), whatever the batch it happens to draw."""

    draw: Callable[[random.Random, int], Problem]
    longest_answer: Callable[[int], int]


TASKS: Dict[str, Task] = {
    "add": Task(_add, lambda digits: len(str(2 * (10 ** digits - 1)))),
    "reverse": Task(_reverse, lambda digits: digits),
}


def _task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: one of {', '.join(sorted(TASKS))}")
    return TASKS[name]


def problems(task: str, rng: random.Random, n: int, digits: int) -> List[Problem]:
    """`n` problems of `task` with `digits`-digit operands, drawn from `rng` only."""
    draw = _task(task).draw
    return [draw(rng, digits) for _ in range(n)]


def longest_response(task: str, digits: int) -> int:
    """Tokens in the longest exact response to any `task` problem: its answer, then EOS."""
    return _task(task).longest_answer(digits) + 1
