#pragma once
// LLM architectures the engine model knows: the five models of OrchestrRL Table 3.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct model_spec {
  std::string name;
  double total_params = 0;  // all weights (MoE: every expert)
  double active_params = 0; // weights read and multiplied per token (MoE: routed experts only)
  int d_model = 0;
  int layers = 0;
  int ffn_intermediate = 0; // dense FFN width, or one expert's width for MoE
  int experts = 0;          // 0 for dense models
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 128;
  int dtype_bytes = 2; // BF16 weights and KV cache
  int vocab = 152064;
  int experts_per_token = 0; // MoE top-k routing

  bool moe() const { return experts > 0; }
  double weight_bytes() const { return total_params * dtype_bytes; }
  /// Attention projections and embeddings: what an AFD attention GPU holds and every token
  /// reads in full.
  double attention_params() const {
    double per_layer = double(d_model) * head_dim * (2.0 * q_heads + 2.0 * kv_heads);
    return per_layer * layers + 2.0 * vocab * d_model;
  }
  /// The FFN (every expert of a MoE): the rest of the weights.
  double ffn_params() const { return total_params - attention_params(); }
  /// FFN weights one token multiplies (routed experts only, for MoE).
  double active_ffn_params() const { return active_params - attention_params(); }
  /// Share of the FFN weights a decode step of `batch` tokens reads: every expert some token
  /// is routed to (uniform top-k routing), all of it for a dense model.
  double ffn_read_fraction(int batch) const;
  /// K and V of every layer for one token.
  double kv_bytes_per_token() const {
    return 2.0 * layers * kv_heads * head_dim * dtype_bytes;
  }
};

/// OrchestrRL Table 3, in its order. Active parameters of the MoE models are the "A14B" and
/// "A22B" of their names.
const std::vector<model_spec>& builtin_models();

std::optional<model_spec> find_model(std::string_view name);

} // namespace loom
