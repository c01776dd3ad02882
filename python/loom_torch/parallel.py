"""Tensor-parallel instances: TPk is k processes in one torch.distributed group (gloo on CPU,
NCCL on CUDA), each holding its shard of the decoder.

Every rank runs the same forward on the same batch; the two all-reduces per layer are where
they meet. A reshard (Loom's Reconfigure) tears the group down and builds another over the new
ranks, with the weights split again from the full tensors.
"""

import multiprocessing as mp
import socket
from typing import Callable, List

import torch
import torch.distributed as dist

from .config import ModelConfig
from .generate import greedy
from .model import AllReduce, Decoder, init_weights


def free_address() -> str:
    """A tcp:// rendezvous address on loopback that no one listens on yet."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def join_group(rank: int, tp: int, address: str, device: str = "cpu") -> AllReduce:
    """Joins the instance's process group; the sum over its ranks, in place."""
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, init_method=address, rank=rank, world_size=tp)

    def reduce(t: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(t)
        return t
    return reduce


def leave_group() -> None:
    """Tears the group down (before a reshard builds the next)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def _greedy_rank(rank: int, tp: int, address: str, cfg: ModelConfig, seed: int,
                 prompts: List[List[int]], max_new: int, out: "mp.Queue") -> None:
    torch.set_num_threads(1)
    reduce = join_group(rank, tp, address) if tp > 1 else None
    try:
        outputs = greedy(Decoder(cfg, init_weights(cfg, seed), rank, tp, reduce), prompts,
                         max_new)
        if rank == 0:
            out.put(outputs)
    finally:
        leave_group()


def on_ranks(target: Callable, tp: int, *args) -> list:
    """Runs target(rank, tp, address, *args, queue) in `tp` fresh processes (spawned: no
    state shared but the group) and returns what rank 0 put on the queue."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    address = free_address()
    procs = [ctx.Process(target=target, args=(r, tp, address, *args, queue)) for r in range(tp)]
    for p in procs:
        p.start()
    result = queue.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise RuntimeError(f"a TP{tp} rank exited with {p.exitcode}")
    return result


def tp_greedy(cfg: ModelConfig, seed: int, tp: int, prompts: List[List[int]],
              max_new: int) -> List[List[int]]:
    """Greedy outputs of a TP`tp` instance of the seeded model, one process per rank."""
    return on_ranks(_greedy_rank, tp, cfg, seed, prompts, max_new)
