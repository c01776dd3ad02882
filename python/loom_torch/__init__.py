"""Loom's reference engine on PyTorch: a Qwen2-shaped decoder with per-request KV caches and
real tensor parallelism, small enough for CI, on CPU or CUDA.

Modules by idea: `config` (the model's sizes), `tokenizer` (bytes), `model` (the decoder and
its TP shards), `parallel` (process groups over torch.distributed), `instance` (a TPk serving
instance: rank 0 here, the others mirroring it, here or on other engines; caches by request),
`batching` (continuous batching with KV memory accounting and preemption), `generate` (greedy and sampled decoding,
a cache as bytes), `kv_channel` (the data channels: prompts, outputs and moved requests with their
caches), `engine` (loom-engine-torch: one node's server obeying Loom's commands), `profile` (its
`--profile`: step times measured per TP degree, as Loom's engine profile), `router`
(the framework's side of a step), and a GRPO job on the same model: `tasks` (toy tasks with
exact checkers), `rollout` (groups of sampled responses), `trainer` (group advantages, the
clipped loss, AdamW), `learner` (the policy, its checkpoint and the seeds every role
shares), `grpo` (the job on Loom's Job API: the CLI and the driver), `grpo_split` (the trainer
and rollout roles, weights moved along Loom's sync route).
docs/engines.md is the adapter contract; docs/frameworks.md puts a framework under Loom.

Not here: expert parallelism and attention-FFN disaggregation. The model is dense, so EP has
no experts to split; a reshard to either is refused with that reason (docs/engines.md).
"""

from .config import ModelConfig
from .model import Decoder, KvCache, init_weights, shard

__all__ = ["ModelConfig", "Decoder", "KvCache", "init_weights", "shard"]
