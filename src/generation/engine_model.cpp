#include "generation/engine_model.hpp"

#include <algorithm>
#include <cmath>

namespace loom {

engine_model::engine_model(model_spec model, gpu_spec gpu, engine_params params)
  : model_(std::move(model)), gpu_(std::move(gpu)), params_(params) {}

double engine_model::weight_bytes_per_gpu(int tp) const {
  return model_.weight_bytes() / tp;
}

int64_t engine_model::kv_capacity_tokens(int tp) const {
  double usable = tp * (gpu_.hbm_gb * params_.memory_utilization - params_.activation_reserve_gb)
                  * 1e9;
  double free = usable - model_.weight_bytes();
  if (free <= 0)
    return 0;
  // KV heads split across TP ranks; beyond kv_heads ranks they are replicated.
  double per_token = model_.kv_bytes_per_token() * tp / std::min(tp, model_.kv_heads);
  return static_cast<int64_t>(free / per_token);
}

double engine_model::allreduce_s(int tp, double bytes) const {
  if (tp <= 1)
    return 0;
  double ring = 2.0 * (tp - 1) / tp * bytes / (gpu_.nvlink_gbps * 1e9);
  return params_.allreduce_latency_us * 1e-6 + ring;
}

double engine_model::decode_step_s(int tp, int batch, double context_tokens) const {
  if (batch <= 0)
    return 0;
  const auto& m = model_;
  // Memory: this GPU's weights (active ones for MoE) and its share of the batch's KV cache.
  double active_weights = m.active_params * m.dtype_bytes / tp;
  double kv = context_tokens * m.kv_bytes_per_token() / std::min(tp, m.kv_heads);
  double memory_s = (active_weights + kv) / (gpu_.hbm_tbps * 1e12 * params_.hbm_efficiency);
  // Compute: 2 flops per active weight per token, plus QK^T and AV over every context token.
  double flops = 2.0 * m.active_params * batch
                 + 4.0 * m.layers * m.q_heads * m.head_dim * context_tokens;
  double compute_s = flops / tp / (gpu_.bf16_tflops * 1e12 * params_.compute_efficiency);
  // Two all-reduces per layer (attention output, MLP output) of the batch's hidden states.
  double comm_s = 2.0 * m.layers * allreduce_s(tp, double(batch) * m.d_model * m.dtype_bytes);
  double host_s = params_.step_overhead_ms * 1e-3 + params_.per_request_overhead_us * 1e-6 * batch;
  return std::max(memory_s, compute_s) + comm_s + host_s;
}

double engine_model::prefill_s(int tp, double tokens) const {
  if (tokens <= 0)
    return 0;
  const auto& m = model_;
  double flops = 2.0 * m.active_params * tokens;
  double compute_s = flops / tp / (gpu_.bf16_tflops * 1e12 * params_.compute_efficiency);
  double comm_s = 2.0 * m.layers * allreduce_s(tp, tokens * m.d_model * m.dtype_bytes);
  return compute_s + comm_s;
}

} // namespace loom
