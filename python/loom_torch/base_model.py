"""The base model GRPO starts from: the reference engine's model after a little next-token
training on the task's prompts followed by answers of the right form and random content.

RLVR post-trains a pretrained model, which already writes answers that look like answers;
RL teaches it which one is right. From random weights GRPO spends its samples finding the
answer's alphabet and its stop, and collapses onto the first stopping response it finds. The
base model knows the form (digits, how many, then EOS) and nothing of the task: each digit is
random, so it is right once in ten.
"""

import random

import torch

from .config import ModelConfig
from .model import Weights, init_weights
from .tasks import answer_form, problems
from .trainer import Trainer

BATCH = 32  # sequences per step


def base_weights(cfg: ModelConfig, task: str, digits: int, seed: int, steps: int) -> Weights:
    """`steps` AdamW steps of next-token loss on answers of the right form (0: the random
    initial weights), every draw seeded by `seed` alone."""
    weights = init_weights(cfg, seed)
    if steps <= 0:
        return weights
    trainer = Trainer(cfg, weights, lr=1e-3)
    rng = random.Random(f"base model {seed}")
    for _ in range(steps):
        samples = [(p.prompt_tokens(), answer_form(p, rng), 1.0)
                   for p in problems(task, rng, BATCH, digits)]
        loss = -torch.cat(trainer.response_logprobs(samples)).mean()
        trainer.optimizer.zero_grad()
        loss.backward()
        trainer.optimizer.step()
    return trainer.state()
