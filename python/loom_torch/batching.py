"""Continuous batching as vLLM and SGLang do it: a waiting queue, a running batch bounded by
`max_batch` and by the KV cache's memory, one forward per step that prefills newly admitted
requests and decodes one token for every running one, and preemption when memory runs out.

KV capacity is counted in tokens from a byte budget (`ModelConfig.kv_bytes_per_token`), so
GenStats' `kv_free` and the balancer's view of a full instance are the engine's real state.
A preempted request drops its cache and goes back to the front of the queue; when admitted
again it recomputes its cache from its tokens (vLLM's recompute preemption).
"""

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Tuple

from .instance import Instance
from .model import KvCache
from .tokenizer import EOS


@dataclass
class Request:
    """A request on this instance: its prompt and what it generated (its cache lives on the
    instance's ranks, by id)."""

    id: int
    prompt: List[int]
    max_new: int
    output: List[int] = field(default_factory=list)

    @property
    def context(self) -> int:
        return len(self.prompt) + len(self.output)

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new or (bool(self.output) and self.output[-1] == EOS)


class Batcher:
    """One instance's scheduler, run by the engine that leads the instance (rank 0)."""

    def __init__(self, instance: Instance, max_batch: int, kv_capacity_tokens: int):
        self.instance = instance
        self.max_batch = max_batch
        self.kv_capacity = kv_capacity_tokens
        self.waiting: Deque[Request] = deque()
        self.running: Dict[int, Request] = {}
        self.preemptions = 0
        self.decode_rate_tps = 0.0  # tokens per second over the last step

    def kv_used(self) -> int:
        return sum(self.instance.cached(i) for i in self.running)

    def add(self, request: Request, cache: Optional[KvCache] = None) -> None:
        """Queues a request; one arriving with its cache (a KV transfer) keeps it."""
        if cache is not None:
            self.instance.put(request.id, cache)
        self.waiting.append(request)

    def release(self, request_id: int) -> Optional[Tuple[Request, Optional[KvCache]]]:
        """Takes a request out (a migration's source lets it go) with its cache where the
        instance can hand it over whole (TP1); otherwise the cache is freed (recompute)."""
        r = self.running.pop(request_id, None)
        if r is None:
            r = next((w for w in self.waiting if w.id == request_id), None)
            if r is None:
                return None
            self.waiting.remove(r)
        if self.instance.cached(request_id) and self.instance.tp == 1:
            return r, self.instance.take(request_id)
        self.instance.drop([request_id])
        return r, None

    def _admit(self) -> None:
        free = self.kv_capacity - self.kv_used() - len(self.running)  # a token each this step
        while self.waiting and len(self.running) < self.max_batch:
            r = self.waiting[0]
            need = r.context - self.instance.cached(r.id) + 1
            if need > free:
                break
            free -= need
            self.running[self.waiting.popleft().id] = r

    def _preempt_until_fits(self) -> None:
        # The newest running request gives its memory back first (vLLM's recompute policy).
        while self.running and self.kv_used() + len(self.running) > self.kv_capacity:
            victim = self.running.pop(next(reversed(self.running)))
            self.instance.drop([victim.id])
            self.waiting.appendleft(victim)
            self.preemptions += 1

    def step(self) -> List[Request]:
        """One forward over the running batch; the requests that finished in it."""
        self._preempt_until_fits()
        self._admit()
        if not self.running:
            return []
        batch = list(self.running.values())
        # A request's first run, or its run after preemption or a recompute migration,
        # (re)computes every token its cache lacks; the others feed their last token.
        feeds = [(r.id, (r.prompt + r.output)[self.instance.cached(r.id):]) for r in batch]
        started = time.perf_counter()
        tokens = self.instance.forward(feeds).argmax(-1).tolist()
        elapsed = time.perf_counter() - started
        self.decode_rate_tps = len(batch) / elapsed if elapsed > 0 else 0.0
        finished = []
        for r, t in zip(batch, tokens):
            r.output.append(t)
            if r.done:
                finished.append(self.running.pop(r.id))
        self.instance.drop([r.id for r in finished])
        return finished
