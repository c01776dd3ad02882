"""Process groups for tensor parallelism: TPk is k processes in one torch.distributed group
(gloo on CPU, NCCL on CUDA), each holding its shard of the decoder (instance.py runs them).

Every rank runs the same forward on the same batch; the two all-reduces per layer are where
they meet. A reshard (Loom's Reconfigure) tears the group down and builds another over the new
ranks, with the weights split again from the full tensors.
"""

import socket

import torch
import torch.distributed as dist

from .model import AllReduce


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
