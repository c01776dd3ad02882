"""The reference engine's model shape: a decoder of the Qwen2 family's layout, sized small.

Qwen2 (and Llama) decoders are RMSNorm -> grouped-query attention with rotary positions ->
RMSNorm -> SwiGLU MLP, repeated; only the sizes differ between a 0.5B and a 72B model. Keeping
the layout and shrinking the sizes makes every mechanism Loom drives (tensor-parallel head
splits, KV caches per request, KV bytes to move) the real one, at a cost CI can pay.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the decoder; `kv_heads` < `heads` is grouped-query attention."""

    layers: int = 2
    hidden: int = 128
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 256
    vocab: int = 258  # 256 bytes, then BOS and EOS (tokenizer.py)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    max_context: int = 2048

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def validate(self, tp: int = 1) -> None:
        """Raises ValueError naming the size that does not fit (e.g. heads not divisible by
        the TP degree: Megatron-style splits give each rank whole heads)."""
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for rotary positions")
        for name, n in (("heads", self.heads), ("ffn", self.ffn)):
            if tp < 1 or n % tp:
                raise ValueError(f"{name} {n} does not split over TP{tp}")
        if self.kv_heads % tp and tp % self.kv_heads:
            raise ValueError(f"kv_heads {self.kv_heads} neither split over TP{tp} nor divide it")

    def kv_heads_per_rank(self, tp: int) -> int:
        """KV heads one TP rank holds: its share, or one head replicated on tp/kv_heads ranks
        when the degree exceeds them (what vLLM and SGLang do for GQA models at high TP)."""
        return max(self.kv_heads // tp, 1)

    def kv_bytes_per_token(self, tp: int = 1, element_bytes: int = 4) -> int:
        """KV cache bytes one token takes on one TP rank (keys and values, every layer)."""
        return 2 * self.layers * self.kv_heads_per_rank(tp) * self.head_dim * element_bytes
