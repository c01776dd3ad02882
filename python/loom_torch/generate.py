"""Greedy and sampled decoding with KV caches, and a request's cache as bytes to move.

A KV migration (OrchestrRL §4.3) either ships the request's cache tensors to the destination
or ships only its tokens and recomputes the cache there; both must continue the request
exactly as if it had never moved. `pack`/`unpack` are the wire form of the first, and
recomputing is a prefill of every token the request has.
"""

import json
from typing import Callable, List, Tuple

import torch

from .model import Decoder, KvCache
from .tokenizer import EOS


Pick = Callable[[torch.Tensor], List[int]]


def greedy(decoder: Decoder, prompts: List[List[int]], max_new: int) -> List[List[int]]:
    """Each prompt decoded greedily, all in one batch (prefill, then one token per step),
    stopping at EOS or `max_new` tokens."""
    return _decode(decoder, prompts, max_new, lambda logits: logits.argmax(-1).tolist())


def sample(decoder: Decoder, prompts: List[List[int]], max_new: int,
           generator: torch.Generator, temperature: float = 1.0,
           to_max: bool = False) -> List[List[int]]:
    """Each prompt decoded by sampling from softmax(logits / temperature), all in one batch:
    an RL rollout (GRPO draws a group of samples per prompt). Seeded by `generator` only, so
    a run is reproducible. `to_max`: past EOS too, every response `max_new` tokens long (the
    worst case WEAVE's profiling pass times, §5 (1))."""
    def pick(logits: torch.Tensor) -> List[int]:
        probs = torch.softmax(logits / temperature, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1).tolist()
    return _decode(decoder, prompts, max_new, pick, to_max)


def _decode(decoder: Decoder, prompts: List[List[int]], max_new: int,
            pick: Pick, to_max: bool = False) -> List[List[int]]:
    caches = [KvCache(decoder.cfg.layers) for _ in prompts]
    outs: List[List[int]] = [[] for _ in prompts]
    live = list(range(len(prompts)))
    feed = [list(p) for p in prompts]
    while live:
        logits = decoder.forward([feed[i] for i in live], [caches[i] for i in live])
        still = []
        for i, t in zip(live, pick(logits)):
            outs[i].append(t)
            feed[i] = [t]
            if (to_max or t != EOS) and len(outs[i]) < max_new:
                still.append(i)
        live = still
    return outs


def pack(cache: KvCache) -> Tuple[bytes, memoryview]:
    """The cache as a header (per-layer shapes, dtype) and one contiguous body: what a KV
    transfer sends, with one copy of the tensors and no pickling."""
    tensors = cache.keys + cache.values
    header = json.dumps({"layers": len(cache.keys), "dtype": str(tensors[0].dtype),
                         "shapes": [list(t.shape) for t in tensors]}).encode()
    body = torch.cat([t.reshape(-1) for t in tensors]).cpu().numpy()
    return header, memoryview(body).cast("B")


def unpack(header: bytes, body, device: str = "cpu") -> KvCache:
    """A cache from pack()'s header and body (any buffer), on `device`."""
    meta = json.loads(header)
    dtype = getattr(torch, meta["dtype"].split(".")[-1])
    flat = torch.frombuffer(bytearray(body), dtype=dtype)
    tensors, at = [], 0
    for shape in meta["shapes"]:
        n = 1
        for d in shape:
            n *= d
        tensors.append(flat[at:at + n].view(shape).to(device))
        at += n
    cache = KvCache(meta["layers"])
    cache.keys, cache.values = tensors[:meta["layers"]], tensors[meta["layers"]:]
    return cache
