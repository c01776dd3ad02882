"""One serving instance: the decoder on TP ranks and each request's KV cache, by request id.

Rank 0 is the calling process (the engine that leads the instance, as Loom's layout names it);
ranks 1..k-1 are worker processes that mirror every forward on their shards and keep their
shard of each request's cache. Rank 0 broadcasts what to run, so all ranks take the same
batches; only rank 0 reads the logits. A reshard (Reconfigure) closes the instance and opens
another over the new degree: the requests it had are recomputed from their tokens there, as
Loom's drain-reshard-admit sequence expects.
"""

import multiprocessing as mp
from typing import Dict, List, Tuple

import torch
import torch.distributed as dist

from .config import ModelConfig
from .model import Decoder, KvCache, init_weights
from .parallel import free_address, join_group, leave_group

Feed = Tuple[int, List[int]]  # request id, its tokens not yet in its cache


def _mirror_rank(rank: int, tp: int, address: str, cfg: ModelConfig, seed: int,
                 device: str) -> None:
    """A worker rank: runs what rank 0 broadcasts until told to stop."""
    torch.set_num_threads(1)
    decoder = Decoder(cfg, init_weights(cfg, seed), rank, tp, join_group(rank, tp, address, device),
                      device)
    caches: Dict[int, KvCache] = {}
    try:
        while True:
            box = [None]
            dist.broadcast_object_list(box, src=0)
            op, arg = box[0]
            if op == "forward":
                decoder.forward([t for _, t in arg],
                                [caches.setdefault(i, KvCache(cfg.layers)) for i, _ in arg])
            elif op == "drop":
                for i in arg:
                    caches.pop(i, None)
            else:
                return
    finally:
        leave_group()


class Instance:
    """A TP`tp` instance of the seeded model, rank 0 here."""

    def __init__(self, cfg: ModelConfig, seed: int, tp: int = 1, device: str = "cpu"):
        cfg.validate(tp)
        self.cfg, self.tp = cfg, tp
        self._workers: List[mp.Process] = []
        reduce = None
        if tp > 1:
            address = free_address()
            ctx = mp.get_context("spawn")
            self._workers = [ctx.Process(target=_mirror_rank, daemon=True,
                                         args=(r, tp, address, cfg, seed, device))
                             for r in range(1, tp)]
            for p in self._workers:
                p.start()
            reduce = join_group(0, tp, address, device)
        self.decoder = Decoder(cfg, init_weights(cfg, seed), 0, tp, reduce, device)
        self.caches: Dict[int, KvCache] = {}

    def _tell(self, op: str, arg) -> None:
        if self.tp > 1:
            dist.broadcast_object_list([(op, arg)], src=0)

    def forward(self, feeds: List[Feed]) -> torch.Tensor:
        """Each request's new tokens after its cache, on every rank; the logits (full)."""
        self._tell("forward", feeds)
        caches = [self.caches.setdefault(i, KvCache(self.cfg.layers)) for i, _ in feeds]
        return self.decoder.forward([t for _, t in feeds], caches)

    def cached(self, request: int) -> int:
        """Tokens of the request's cache on this instance (0: none)."""
        c = self.caches.get(request)
        return 0 if c is None else c.tokens

    def drop(self, requests: List[int]) -> None:
        """Frees the requests' caches on every rank."""
        self._tell("drop", list(requests))
        for i in requests:
            self.caches.pop(i, None)

    def take(self, request: int) -> KvCache:
        """Removes and returns the request's cache, to move it (TP1: the whole cache is here)."""
        if self.tp > 1:
            raise ValueError("a TP>1 instance's cache is sharded over its ranks: recompute")
        return self.caches.pop(request)

    def put(self, request: int, cache: KvCache) -> None:
        """Installs a moved cache for the request (TP1)."""
        if self.tp > 1:
            raise ValueError("a TP>1 instance takes requests by recomputing them")
        self.caches[request] = cache

    def close(self) -> None:
        """Stops the worker ranks and leaves the group (before a reshard opens the next)."""
        self._tell("stop", None)
        for p in self._workers:
            p.join(timeout=60)
        leave_group()
        self.caches.clear()
