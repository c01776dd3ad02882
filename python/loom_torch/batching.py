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
from typing import Deque, Dict, List, Optional

from .model import Decoder, KvCache
from .tokenizer import EOS


@dataclass
class Request:
    """A request on this instance: its prompt, what it generated, and its cache once it runs."""

    id: int
    prompt: List[int]
    max_new: int
    output: List[int] = field(default_factory=list)
    cache: Optional[KvCache] = None

    @property
    def context(self) -> int:
        return len(self.prompt) + len(self.output)

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new or (bool(self.output) and self.output[-1] == EOS)


class Batcher:
    """One instance's scheduler over its decoder (on every TP rank alike)."""

    def __init__(self, decoder: Decoder, max_batch: int, kv_capacity_tokens: int):
        self.decoder = decoder
        self.max_batch = max_batch
        self.kv_capacity = kv_capacity_tokens
        self.waiting: Deque[Request] = deque()
        self.running: Dict[int, Request] = {}
        self.preemptions = 0
        self.decode_rate_tps = 0.0  # tokens per second over the last step

    def kv_used(self) -> int:
        return sum(r.cache.tokens for r in self.running.values() if r.cache is not None)

    def add(self, request: Request) -> None:
        """Queues a request; one arriving with a cache (a KV transfer) keeps it."""
        self.waiting.append(request)

    def remove(self, request_id: int) -> Optional[Request]:
        """Takes a request out (a migration's source releases it), cache included."""
        if request_id in self.running:
            return self.running.pop(request_id)
        for r in self.waiting:
            if r.id == request_id:
                self.waiting.remove(r)
                return r
        return None

    def _admit(self) -> None:
        free = self.kv_capacity - self.kv_used() - len(self.running)  # a token each this step
        while self.waiting and len(self.running) < self.max_batch:
            r = self.waiting[0]
            need = r.context - (r.cache.tokens if r.cache else 0) + 1
            if need > free:
                break
            free -= need
            self.running[self.waiting.popleft().id] = r

    def _preempt_until_fits(self) -> None:
        # The newest running request gives its memory back first (vLLM's recompute policy).
        while self.running and self.kv_used() + len(self.running) > self.kv_capacity:
            victim = self.running.pop(next(reversed(self.running)))
            victim.cache = None
            self.waiting.appendleft(victim)
            self.preemptions += 1

    def step(self) -> List[Request]:
        """One forward over the running batch; the requests that finished in it."""
        self._preempt_until_fits()
        self._admit()
        if not self.running:
            return []
        batch = list(self.running.values())
        feeds = []
        for r in batch:
            if r.cache is None:  # first run, or after preemption: (re)compute every token
                r.cache = KvCache(self.decoder.cfg.layers)
            feeds.append((r.prompt + r.output)[r.cache.tokens:])
        started = time.perf_counter()
        tokens = self.decoder.forward(feeds, [r.cache for r in batch]).argmax(-1).tolist()
        elapsed = time.perf_counter() - started
        self.decode_rate_tps = len(batch) / elapsed if elapsed > 0 else 0.0
        finished = []
        for r, t in zip(batch, tokens):
            r.output.append(t)
            if r.done:
                finished.append(self.running.pop(r.id))
        return finished
