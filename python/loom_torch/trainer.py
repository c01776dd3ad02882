"""The training half of a GRPO iteration (DeepSeekMath §4.1.2): advantages normalised within
each prompt's group, a PPO-style clipped surrogate per token averaged per response, AdamW.

No value model and no KL term (β = 0, as DAPO and veRL's GRPO recipes default to): the group
mean is the baseline. The old log-probabilities are the trainer's own before its first update
of the iteration, which equal the rollout policy's when weights were synced after the last
iteration, as in veRL's `compute_log_prob` before `update_actor`.
"""

import random
from typing import Dict, List, Tuple

import torch

from .config import ModelConfig
from .model import Decoder, KvCache, Weights
from .rollout import Group


def group_advantages(rewards: List[float], eps: float = 1e-6) -> List[float]:
    """(r - mean) / std within one group; a group whose rewards are all equal teaches
    nothing and gets zeros."""
    t = torch.tensor(rewards, dtype=torch.float64)
    std = t.std(unbiased=False)
    if std < eps:
        return [0.0] * len(rewards)
    return ((t - t.mean()) / (std + eps)).tolist()


Sample = Tuple[List[int], List[int], float]  # prompt tokens, response tokens, advantage


class Trainer:
    """The policy's trainable weights and their optimizer."""

    def __init__(self, cfg: ModelConfig, weights: Weights, lr: float, clip: float = 0.2,
                 minibatches: int = 2):
        self.cfg, self.clip, self.minibatches = cfg, clip, minibatches
        self.weights = {k: v.detach().clone().requires_grad_(True) for k, v in weights.items()}
        self.optimizer = torch.optim.AdamW(list(self.weights.values()), lr=lr,
                                           weight_decay=0.0)
        self.decoder = Decoder(cfg, self.weights)

    def response_logprobs(self, samples: List[Sample]) -> List[torch.Tensor]:
        """log π(response token | everything before it) for each sample, with gradients."""
        seqs = [p + r for p, r, _ in samples]
        hidden = self.decoder.hidden(seqs, [KvCache(self.cfg.layers) for _ in seqs])
        rows, targets, at = [], [], 0
        for p, r, _ in samples:
            rows.extend(range(at + len(p) - 1, at + len(p) + len(r) - 1))
            targets.extend(r)
            at += len(p) + len(r)
        logp = torch.log_softmax(self.decoder.logits(hidden[rows]), dim=-1)
        picked = logp.gather(1, torch.tensor(targets)[:, None]).squeeze(1)
        return list(picked.split([len(r) for _, r, _ in samples]))

    def update(self, groups: List[Group], rng: random.Random,
               every_sample: bool = False) -> Dict[str, float]:
        """One iteration's update: every response with a nonzero advantage (`every_sample`:
        every response, the worst case a profiling pass times), in `minibatches` shuffled
        steps. Returns the mean loss and the fraction of clipped tokens."""
        samples = [(g.problem.prompt_tokens(), r, a)
                   for g in sorted(groups, key=lambda g: g.index)
                   for r, a in zip(g.responses, group_advantages(g.rewards))
                   if a != 0.0 or every_sample]
        if not samples:
            return {"loss": 0.0, "clipped": 0.0, "samples": 0}
        with torch.no_grad():
            old = [t.detach() for t in self.response_logprobs(samples)]
        order = list(range(len(samples)))
        rng.shuffle(order)
        losses, clipped, tokens = [], 0, 0
        for k in range(self.minibatches):
            part = order[k::self.minibatches]
            if not part:
                continue
            new = self.response_logprobs([samples[i] for i in part])
            terms = []
            for i, lp in zip(part, new):
                adv = samples[i][2]
                ratio = torch.exp(lp - old[i])
                bounded = ratio.clamp(1 - self.clip, 1 + self.clip)
                terms.append(-torch.min(ratio * adv, bounded * adv).mean())
                clipped += int(((ratio - bounded).abs() > 0).sum())
                tokens += len(lp)
            loss = torch.stack(terms).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            losses.append(float(loss))
        return {"loss": sum(losses) / len(losses), "clipped": clipped / max(1, tokens),
                "samples": len(samples)}

    def host_memory_gb(self) -> float:
        """What training holds between its turns: weights, gradients and AdamW's moments,
        counted from the tensors themselves."""
        tensors = list(self.weights.values())
        tensors += [w.grad for w in self.weights.values() if w.grad is not None]
        tensors += [t for st in self.optimizer.state.values() for t in st.values()
                    if torch.is_tensor(t)]
        return sum(t.numel() * t.element_size() for t in tensors) / 1e9

    def state(self) -> Weights:
        """The current weights, detached (what a sync sends)."""
        return {k: v.detach() for k, v in self.weights.items()}
