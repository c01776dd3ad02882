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

double engine_model::step_terms::at(double c) const {
  return std::max(memory_base + memory_per_token * c, compute_base + compute_per_token * c)
         + fixed;
}

engine_model::step_terms engine_model::decode_terms(int tp, int batch) const {
  const auto& m = model_;
  const double bandwidth = gpu_.hbm_tbps * 1e12 * params_.hbm_efficiency;
  const double flops = gpu_.bf16_tflops * 1e12 * params_.compute_efficiency;
  step_terms t;
  // Memory: this GPU's weights (active ones for MoE) and its share of the batch's KV cache.
  t.memory_base = m.active_params * m.dtype_bytes / tp / bandwidth;
  t.memory_per_token = m.kv_bytes_per_token() / std::min(tp, m.kv_heads) / bandwidth;
  // Compute: 2 flops per active weight per token, plus QK^T and AV over every context token.
  t.compute_base = 2.0 * m.active_params * batch / tp / flops;
  t.compute_per_token = 4.0 * m.layers * m.q_heads * m.head_dim / tp / flops;
  // Two all-reduces per layer (attention output, MLP output) of the batch's hidden states.
  double comm_s = 2.0 * m.layers * allreduce_s(tp, double(batch) * m.d_model * m.dtype_bytes);
  double host_s = params_.step_overhead_ms * 1e-3 + params_.per_request_overhead_us * 1e-6 * batch;
  t.fixed = comm_s + host_s;
  return t;
}

double engine_model::decode_step_s(int tp, int batch, double context_tokens) const {
  if (batch <= 0)
    return 0;
  return decode_terms(tp, batch).at(context_tokens);
}

double engine_model::decode_steps_s(int tp, int batch, double context_tokens,
                                    int64_t steps) const {
  if (batch <= 0 || steps <= 0)
    return 0;
  auto t = decode_terms(tp, batch);
  const double g = batch;
  const double c0 = context_tokens;
  // Sum over steps i in [lo, hi) of a + b (c0 + g i).
  auto linear = [&](double a, double b, int64_t lo, int64_t hi) {
    double n = double(hi - lo);
    return n * (a + b * c0) + b * g * (double(lo + hi - 1) * n / 2);
  };
  // Memory minus compute is linear in i, so the dominant term switches at most once.
  double d0 = (t.memory_base - t.compute_base) + (t.memory_per_token - t.compute_per_token) * c0;
  double slope = (t.memory_per_token - t.compute_per_token) * g;
  bool memory_first = d0 >= 0;
  int64_t split = steps;
  if (slope != 0) {
    double root = -d0 / slope;
    if (root > 0 && root < double(steps)) {
      split = static_cast<int64_t>(std::ceil(root));
      if (((d0 + slope * double(split)) >= 0) == memory_first)
        ++split;
      split = std::min(split, steps);
    }
  }
  double mem_first = linear(t.memory_base, t.memory_per_token, 0, split)
                     + linear(t.compute_base, t.compute_per_token, split, steps);
  double comp_first = linear(t.compute_base, t.compute_per_token, 0, split)
                      + linear(t.memory_base, t.memory_per_token, split, steps);
  return (memory_first ? mem_first : comp_first) + double(steps) * t.fixed;
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
