"""One serving instance: the decoder on TP ranks and each request's KV cache, by request id.

Rank 0 is the calling process (the engine that leads the instance, as Loom's layout names it);
ranks 1..k-1 are worker processes that mirror every forward on their shards and keep their
shard of each request's cache. Rank 0 broadcasts what to run, so all ranks take the same
batches; only rank 0 reads the logits. A reshard (Reconfigure) closes the instance and opens
another over the new degree: the requests it had are recomputed from their tokens there, as
Loom's drain-reshard-admit sequence expects.

An instance wider than its lead's devices spans engines (OrchestrRL's cross-node TP): the lead
hosts ranks 0..a-1, and each other engine of the slot hosts the next ones as `Mirrors`, all
meeting at the lead's rendezvous address.
"""

import datetime
import json
import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from loom_client.data_channel import ask

from .config import ModelConfig
from .model import Decoder, KvCache, init_weights
from .parallel import free_address, join_group, leave_group, rank_device

Feed = Tuple[int, List[int]]  # request id, its tokens not yet in its cache

# A rank that hears nothing for this long takes its group for dead (gloo's default is 30 min);
# an idle lead pings its ranks well within it (Instance.keep_alive).
GROUP_TIMEOUT = datetime.timedelta(seconds=300)
PING_S = 60.0
JOIN_TIMEOUT = datetime.timedelta(seconds=120)  # for the engines of a spanning instance to meet


@dataclass(frozen=True)
class Arrival:
    """Where a follower's rank says it is about to join (the lead's data channel), so that the
    lead joins only then: torch's rendezvous holds the GIL while it waits, which would stall
    the lead's heartbeats and its data channel for as long as the others take to start."""

    lead: str
    instance: int
    epoch: int


def _mirror_rank(rank: int, tp: int, address: str, cfg: ModelConfig, seed: int,
                 device: str, joined, arrive: Optional[Arrival]) -> None:
    """A worker rank: runs what rank 0 broadcasts until told to stop."""
    torch.set_num_threads(1)
    if arrive:
        ask(arrive.lead, [b"arrive", json.dumps([arrive.instance, arrive.epoch, rank]).encode()],
            JOIN_TIMEOUT.total_seconds())
    reduce = join_group(rank, tp, address, device, GROUP_TIMEOUT)
    decoder = Decoder(cfg, init_weights(cfg, seed), rank, tp, reduce, device)
    joined.put(rank)
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
            elif op == "stop":
                return
    finally:
        leave_group()


class Mirrors:
    """Worker ranks `ranks` of a TP`tp` group meeting at `address`, hosted by this engine (the
    lead's local ones, or a follower engine's share of a spanning instance, which `arrive`)."""

    def __init__(self, cfg: ModelConfig, seed: int, tp: int, address: str, ranks: range,
                 device: str = "cpu", arrive: Optional[Arrival] = None):
        ctx = mp.get_context("spawn")
        self._joined = ctx.Queue()
        self.procs = [ctx.Process(target=_mirror_rank, daemon=True,
                                  args=(r, tp, address, cfg, seed,
                                        rank_device(device, r - ranks.start), self._joined,
                                        arrive))
                      for r in ranks]
        for p in self.procs:
            p.start()

    def joined(self, timeout_s: float) -> bool:
        """Whether every rank joined its group (and loaded its shards) within `timeout_s`."""
        until = time.monotonic() + timeout_s
        for _ in self.procs:
            try:
                self._joined.get(timeout=max(until - time.monotonic(), 0.001))
            except Exception:  # noqa: BLE001 - queue.Empty: one did not join in time
                return False
        return True

    def close(self, grace_s: float = 60.0) -> None:
        """Waits for the ranks to end (the lead's stop), then ends the ones that did not."""
        until = time.monotonic() + grace_s
        for p in self.procs:
            p.join(timeout=max(until - time.monotonic(), 0.0))
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


class Instance:
    """A TP`tp` instance of the seeded model, rank 0 here. `local` ranks (1..tp-1 unless it
    spans engines) run here as worker processes; the rest join from other engines at
    `address`."""

    def __init__(self, cfg: ModelConfig, seed: int, tp: int = 1, device: str = "cpu",
                 local: Optional[int] = None, address: Optional[str] = None):
        cfg.validate(tp)
        self.cfg, self.tp = cfg, tp
        self._mirrors: Optional[Mirrors] = None
        self._told = time.monotonic()
        reduce = None
        if tp > 1:
            address = address or free_address()
            self._mirrors = Mirrors(cfg, seed, tp, address, range(1, local or tp), device)
            reduce = join_group(0, tp, address, rank_device(device, 0), GROUP_TIMEOUT)
        self.decoder = Decoder(cfg, init_weights(cfg, seed), 0, tp, reduce,
                               rank_device(device, 0))
        self.caches: Dict[int, KvCache] = {}

    def _tell(self, op: str, arg) -> None:
        if self.tp > 1:
            dist.broadcast_object_list([(op, arg)], src=0)
            self._told = time.monotonic()

    def keep_alive(self) -> None:
        """An idle lead's ping, so no rank times out waiting for the next batch."""
        if self.tp > 1 and time.monotonic() - self._told > PING_S:
            self._tell("ping", None)

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
        """Stops every rank (here and on other engines) and leaves the group, before a reshard
        opens the next. A rank already gone (its engine died) only leaves less to stop."""
        try:
            self._tell("stop", None)
        except RuntimeError as e:
            print(f"instance TP{self.tp}: a rank was gone at close ({e})", flush=True)
        if self._mirrors:
            self._mirrors.close()
        leave_group()
        self.caches.clear()
