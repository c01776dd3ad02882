"""Process groups for tensor parallelism: TPk is k processes in one torch.distributed group
(gloo on CPU, NCCL on CUDA), each holding its shard of the decoder (instance.py runs them).

Every rank runs the same forward on the same batch; the two all-reduces per layer are where
they meet. A reshard (Loom's Reconfigure) tears the group down and builds another over the new
ranks, with the weights split again from the full tensors.
"""

import datetime
import socket
from typing import List, Tuple

import torch
import torch.distributed as dist

from .model import AllReduce


def free_address(host: str = "127.0.0.1") -> str:
    """A tcp:// rendezvous address on `host` that no one listens on yet."""
    with socket.socket() as s:
        s.bind((host, 0))
        return f"tcp://{host}:{s.getsockname()[1]}"


def rank_device(device: str, local: int) -> str:
    """The device of an engine's `local`-th rank: its own GPU on CUDA (NCCL takes one rank per
    GPU); on CPU every rank is a process."""
    return f"cuda:{local}" if device == "cuda" else device


def rank_shares(tp: int, engines: List[Tuple[str, int]]) -> List[Tuple[str, range]]:
    """The ranks each engine of a spanning instance hosts: engines in the slot's order, each
    up to its devices (Loom lays a wide instance over whole engines, the first leading)."""
    out, first = [], 0
    for engine, gpus in engines:
        n = max(0, min(gpus, tp - first))
        out.append((engine, range(first, first + n)))
        first += n
    if first < tp:
        raise ValueError(f"TP{tp} needs {tp} devices; its engines have {first}")
    return out


def join_group(rank: int, tp: int, address: str, device: str = "cpu",
               timeout: datetime.timedelta = datetime.timedelta(minutes=30)) -> AllReduce:
    """Joins the instance's process group; the sum over its ranks, in place."""
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, init_method=address, rank=rank, world_size=tp,
                            timeout=timeout)

    def reduce(t: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(t)
        return t
    return reduce


def leave_group() -> None:
    """Tears the group down (before a reshard builds the next)."""
    if dist.is_initialized():
        dist.destroy_process_group()
