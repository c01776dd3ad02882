"""A Qwen2-shaped decoder whose ranks each hold 1/k of it (tensor parallelism, Megatron-style).

Weights are made once, in full, from a seed (or read from a checkpoint) and every rank keeps
its slice: whole query and KV heads for attention (a KV head replicated where the degree
exceeds them), a slice of the FFN's intermediate width for the MLP. Each layer then needs
exactly two all-reduces (after the attention's output projection and after the MLP's down
projection), as in Megatron-LM §3 and every inference engine's TP. Because slices come from the same full tensors, TP1 and TPk compute the same
function up to the order of floating-point sums.
"""

from typing import Callable, Dict, List, Optional, Tuple

import torch

from .config import ModelConfig

Weights = Dict[str, torch.Tensor]
AllReduce = Callable[[torch.Tensor], torch.Tensor]


def init_weights(cfg: ModelConfig, seed: int) -> Weights:
    """Full weights from `seed`, named as in Qwen2 checkpoints ([out, in] like nn.Linear)."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    h, d = cfg.hidden, cfg.head_dim
    w: Weights = {"embed_tokens": rand(cfg.vocab, h, scale=0.5),
                  "norm": torch.ones(h), "lm_head": rand(cfg.vocab, h, scale=h ** -0.5)}
    for i in range(cfg.layers):
        p = f"layers.{i}."
        w[p + "input_layernorm"] = torch.ones(h)
        w[p + "post_attention_layernorm"] = torch.ones(h)
        w[p + "q_proj"] = rand(cfg.heads * d, h, scale=h ** -0.5)
        w[p + "q_bias"] = rand(cfg.heads * d, scale=0.02)  # Qwen2 has biases on q, k, v only
        w[p + "k_proj"] = rand(cfg.kv_heads * d, h, scale=h ** -0.5)
        w[p + "k_bias"] = rand(cfg.kv_heads * d, scale=0.02)
        w[p + "v_proj"] = rand(cfg.kv_heads * d, h, scale=h ** -0.5)
        w[p + "v_bias"] = rand(cfg.kv_heads * d, scale=0.02)
        w[p + "o_proj"] = rand(h, cfg.heads * d, scale=(cfg.heads * d) ** -0.5)
        w[p + "gate_proj"] = rand(cfg.ffn, h, scale=h ** -0.5)
        w[p + "up_proj"] = rand(cfg.ffn, h, scale=h ** -0.5)
        w[p + "down_proj"] = rand(h, cfg.ffn, scale=cfg.ffn ** -0.5)
    return w


# How each weight splits over TP ranks: along its rows (a column-parallel layer), its columns
# (a row-parallel layer, followed by an all-reduce), or not at all.
_ROWS = ("q_proj", "q_bias", "k_proj", "k_bias", "v_proj", "v_bias", "gate_proj", "up_proj")
_COLUMNS = ("o_proj", "down_proj")
_KV = ("k_proj", "k_bias", "v_proj", "v_bias")


def shard(weights: Weights, rank: int, tp: int, kv_heads: int = 0) -> Weights:
    """Rank `rank`'s slice of full `weights` for TP`tp` (contiguous copies: a rank keeps only
    its own bytes). With more ranks than `kv_heads`, each KV head is replicated on tp/kv_heads
    consecutive ranks: those whose query heads read it."""
    out: Weights = {}
    for name, t in weights.items():
        kind = name.rsplit(".", 1)[-1]
        if kv_heads and tp > kv_heads and kind in _KV:
            n = t.shape[0] // kv_heads
            head = rank // (tp // kv_heads)
            out[name] = t[head * n:(head + 1) * n].contiguous()
        elif kind in _ROWS:
            n = t.shape[0] // tp
            out[name] = t[rank * n:(rank + 1) * n].contiguous()
        elif kind in _COLUMNS:
            n = t.shape[1] // tp
            out[name] = t[:, rank * n:(rank + 1) * n].contiguous()
        else:
            out[name] = t
    return out


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class KvCache:
    """One request's keys and values on one rank: per layer, [kv_heads/tp, tokens, head_dim].
    Its tensors are what a KV migration moves."""

    def __init__(self, layers: int):
        self.keys: List[Optional[torch.Tensor]] = [None] * layers
        self.values: List[Optional[torch.Tensor]] = [None] * layers

    @property
    def tokens(self) -> int:
        return 0 if self.keys[0] is None else int(self.keys[0].shape[1])

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        old_k, old_v = self.keys[layer], self.values[layer]
        self.keys[layer] = k if old_k is None else torch.cat((old_k, k), dim=1)
        self.values[layer] = v if old_v is None else torch.cat((old_v, v), dim=1)


class Decoder:
    """One TP rank of the decoder. `all_reduce` sums a tensor over the instance's ranks in
    place (identity for TP1); every rank must call forward() with the same batch shape."""

    def __init__(self, cfg: ModelConfig, weights: Weights, rank: int = 0, tp: int = 1,
                 all_reduce: Optional[AllReduce] = None, device: str = "cpu"):
        cfg.validate(tp)
        self.cfg, self.rank, self.tp = cfg, rank, tp
        self.device = torch.device(device)
        self.w = {k: v.to(self.device)
                  for k, v in shard(weights, rank, tp, cfg.kv_heads).items()}
        self.all_reduce = all_reduce or (lambda t: t)
        self.heads, self.kv_heads = cfg.heads // tp, cfg.kv_heads_per_rank(tp)
        d = cfg.head_dim
        self.inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, device=self.device)
                                                  .float() / d))

    def _rope(self, positions: torch.Tensor):
        freqs = torch.outer(positions.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def _attention(self, p: str, x: torch.Tensor, spans: List[int], caches: List[KvCache],
                   layer: int, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        d = self.cfg.head_dim
        q = (x @ self.w[p + "q_proj"].T + self.w[p + "q_bias"]).view(-1, self.heads, d)
        k = (x @ self.w[p + "k_proj"].T + self.w[p + "k_bias"]).view(-1, self.kv_heads, d)
        v = (x @ self.w[p + "v_proj"].T + self.w[p + "v_bias"]).view(-1, self.kv_heads, d)
        q = q * cos[:, None] + _rotate_half(q) * sin[:, None]
        k = k * cos[:, None] + _rotate_half(k) * sin[:, None]
        group = self.heads // self.kv_heads
        outs, start = [], 0
        for n, cache in zip(spans, caches):
            past = 0 if cache.keys[layer] is None else int(cache.keys[layer].shape[1])
            cache.append(layer, k[start:start + n].transpose(0, 1),
                         v[start:start + n].transpose(0, 1))
            keys = cache.keys[layer].repeat_interleave(group, dim=0)      # [heads, T, d]
            values = cache.values[layer].repeat_interleave(group, dim=0)
            scores = q[start:start + n].transpose(0, 1) @ keys.transpose(1, 2) * d ** -0.5
            total = past + n
            causal = torch.arange(total, device=x.device)[None, :] > \
                (past + torch.arange(n, device=x.device))[:, None]
            scores = scores.masked_fill(causal, float("-inf"))
            outs.append((scores.softmax(-1) @ values).transpose(0, 1).reshape(n, -1))
            start += n
        out = torch.cat(outs) @ self.w[p + "o_proj"].T
        return self.all_reduce(out)

    def _mlp(self, p: str, x: torch.Tensor) -> torch.Tensor:
        gate = torch.nn.functional.silu(x @ self.w[p + "gate_proj"].T)
        out = (gate * (x @ self.w[p + "up_proj"].T)) @ self.w[p + "down_proj"].T
        return self.all_reduce(out)

    def hidden(self, tokens: List[List[int]], caches: List[KvCache]) -> torch.Tensor:
        """The final normed hidden state of every new token, [sum of lengths, hidden], after
        what each sequence's cache holds; appends their keys and values to the caches.
        Differentiable in the weights: the GRPO trainer (grpo.py) runs it with gradients."""
        spans = [len(t) for t in tokens]
        flat = torch.tensor([t for seq in tokens for t in seq], device=self.device)
        positions = torch.cat([torch.arange(c.tokens, c.tokens + n, device=self.device)
                               for n, c in zip(spans, caches)])
        cos, sin = self._rope(positions)
        x = self.w["embed_tokens"][flat]
        eps = self.cfg.norm_eps
        for i in range(self.cfg.layers):
            p = f"layers.{i}."
            x = x + self._attention(p, _rms_norm(x, self.w[p + "input_layernorm"], eps), spans,
                                    caches, i, cos, sin)
            x = x + self._mlp(p, _rms_norm(x, self.w[p + "post_attention_layernorm"], eps))
        return _rms_norm(x, self.w["norm"], eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.w["lm_head"].T

    @torch.no_grad()
    def forward(self, tokens: List[List[int]], caches: List[KvCache]) -> torch.Tensor:
        """Runs each sequence's new `tokens` after what its cache holds (a prefill is many
        tokens, a decode step one) and appends their keys and values to the caches. Returns
        the logits after each sequence's last token, [len(tokens), vocab], on every rank."""
        last = torch.tensor([len(t) for t in tokens], device=self.device).cumsum(0) - 1
        return self.logits(self.hidden(tokens, caches)[last])


def pack_weights(weights: Weights) -> Tuple[dict, Dict[str, memoryview]]:
    """Weights as a description (dtype and shape by name) and one buffer each: what a sync
    sends (loom_client.weights), one copy of each tensor and no pickling."""
    description = {k: {"dtype": str(v.dtype).split(".")[-1], "shape": list(v.shape)}
                   for k, v in weights.items()}
    blobs = {k: memoryview(v.detach().contiguous().cpu().numpy()).cast("B")
             for k, v in weights.items()}
    return description, blobs


def unpack_weights(description: dict, blobs: Dict[str, bytes]) -> Weights:
    return {k: torch.frombuffer(bytearray(blobs[k]), dtype=getattr(torch, d["dtype"]))
            .view(d["shape"]) for k, d in description.items()}
