"""Loom's reference engine on PyTorch: a Qwen2-shaped decoder with per-request KV caches and
real tensor parallelism, small enough for CI, on CPU or CUDA.

Modules by idea: `config` (the model's sizes), `tokenizer` (bytes), `model` (the decoder and
its TP shards), `parallel` (TP instances over torch.distributed), `generate` (greedy decoding
with KV caches, and moving a request's cache).
"""

from .config import ModelConfig
from .model import Decoder, KvCache, init_weights, shard

__all__ = ["ModelConfig", "Decoder", "KvCache", "init_weights", "shard"]
