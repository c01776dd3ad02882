#include "generation/kv_migration.hpp"

namespace loom {

kv_move_cost kv_move_cost_of(const engine_model& engine, const parallel_config& dst,
                             int sequences,
                             int64_t tokens_per_sequence, const kv_transfer_path& path) {
  kv_move_cost out;
  const auto& m = engine.model();
  const auto& g = engine.gpu();
  double tokens = double(sequences) * double(tokens_per_sequence);
  double bytes = tokens * m.kv_bytes_per_token();
  out.transfer_s = path.setup_ms * 1e-3
                   + bytes / (path.nics * path.nic_gbps * 1e9 / 8 * path.efficiency);
  // Recompute: the linear prefill cost plus causal attention over each sequence, which grows
  // with the square of its length (QK^T and AV: 2 x L^2 / 2 x head_dim flops per head each).
  double l = double(tokens_per_sequence);
  double attention_flops = 2.0 * m.layers * m.q_heads * m.head_dim * l * l * sequences;
  // Attention runs on the destination's attention GPUs (all of them under TP).
  const int attention_gpus = dst.is_afd() ? dst.tp : dst.gpus();
  out.recompute_s = engine.prefill_s(dst, tokens)
                    + attention_flops / attention_gpus
                        / (g.bf16_tflops * 1e12 * engine.params().compute_efficiency);
  return out;
}

} // namespace loom
