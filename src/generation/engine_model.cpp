#include "generation/engine_model.hpp"

#include <algorithm>
#include <cmath>

namespace loom {

engine_model::engine_model(model_spec model, gpu_spec gpu, engine_params params,
                           std::shared_ptr<const engine_profile> profile)
  : model_(std::move(model)), gpu_(std::move(gpu)), params_(params), profile_(std::move(profile)) {}

double engine_model::usable_hbm_bytes() const {
  return (gpu_.hbm_gb * params_.memory_utilization - params_.activation_reserve_gb) * 1e9;
}

double engine_model::host_s(int batch) const {
  return params_.step_overhead_ms * 1e-3 + params_.per_request_overhead_us * 1e-6 * batch;
}

int engine_model::max_batch(const parallel_config& c) const {
  return params_.max_batch * (c.is_afd() ? 2 : c.attention_groups());
}

double engine_model::weight_bytes_per_gpu(const parallel_config& c) const {
  const auto& m = model_;
  if (c.is_afd())
    return std::max(m.attention_params() / c.tp, m.ffn_params() / c.ffn_gpus) * m.dtype_bytes;
  if (c.is_ep())
    return (m.attention_params() / c.tp + m.ffn_params() / c.ep) * m.dtype_bytes;
  return m.weight_bytes() / c.tp;
}

int64_t engine_model::kv_capacity_tokens(const parallel_config& c) const {
  const auto& m = model_;
  const double usable = usable_hbm_bytes();
  if (usable <= 0 || weight_bytes_per_gpu(c) >= usable)
    return 0;
  if (auto* p = profiled(c); p && p->kv_tokens > 0)
    return p->kv_tokens;
  // The KV cache lives with attention: on its GPUs only under AFD; beside every GPU's weights
  // otherwise. KV heads split across TP ranks; beyond kv_heads ranks they are replicated.
  const double attention_gpus = c.is_afd() ? c.tp : c.gpus();
  const double weights_there = c.is_afd() ? m.attention_params() * m.dtype_bytes
                               : c.is_ep()
                                 ? (m.attention_params() * c.attention_groups() + m.ffn_params())
                                     * m.dtype_bytes
                                 : m.weight_bytes();
  const double free = attention_gpus * usable - weights_there;
  if (free <= 0)
    return 0;
  const double per_token = m.kv_bytes_per_token() * c.tp / std::min(c.tp, m.kv_heads);
  return static_cast<int64_t>(free / per_token);
}

double engine_model::allreduce_s(int tp, double bytes) const {
  if (tp <= 1)
    return 0;
  // A ring inside a node runs over NVLink; one spanning nodes is paced by the NICs.
  const double gbps = tp > params_.gpus_per_node ? params_.nic_gbps / 8 : gpu_.nvlink_gbps;
  double ring = 2.0 * (tp - 1) / tp * bytes / (gbps * 1e9);
  return params_.allreduce_latency_us * 1e-6 + ring;
}

double engine_model::all_to_all_s(int ep, double bytes_per_gpu) const {
  if (ep <= 1)
    return 0;
  // Each GPU keeps 1/ep of its tokens; the rest leaves over NVLink, or over its NIC when
  // the group spans nodes (the slower link paces the collective).
  const double out = bytes_per_gpu * (ep - 1) / ep;
  const double gbps = ep > params_.gpus_per_node ? params_.nic_gbps / 8 : gpu_.nvlink_gbps;
  return params_.allreduce_latency_us * 1e-6 + out / (gbps * 1e9);
}

double engine_model::step_terms::at(double c) const {
  double v = 0;
  for (int j = 0; j < count; ++j)
    v = std::max(v, lines[size_t(j)].base + lines[size_t(j)].per_token * c);
  return v + fixed;
}

engine_model::step_terms engine_model::decode_terms(const parallel_config& c, int batch) const {
  step_terms t;
  auto add = [&](double base, double per_token) { t.lines[size_t(t.count++)] = {base, per_token}; };
  if (auto* p = profiled(c)) {
    add((p->decode.fixed_ms + p->decode.per_request_ms * batch) * 1e-3,
        p->decode.per_kilotoken_ms * 1e-6);
    return t;
  }
  const auto& m = model_;
  const double bandwidth = gpu_.hbm_tbps * 1e12 * params_.hbm_efficiency;
  const double flops = gpu_.bf16_tflops * 1e12 * params_.compute_efficiency;
  const double b = batch;
  const double bytes = m.dtype_bytes;
  const double ffn_read = m.ffn_params() * m.ffn_read_fraction(batch) * bytes;
  const double hidden = b * m.d_model * bytes; // one layer's activations for the batch
  // Attention FLOPs per context token (QK^T and AV), and the KV bytes one token occupies.
  const double attention_flops = 4.0 * m.layers * m.q_heads * m.head_dim;
  const double kv = m.kv_bytes_per_token();
  if (c.is_afd()) {
    const int a = c.tp;
    const int f = c.ffn_gpus;
    // Attention side: its weights, the KV cache, its TP all-reduce per layer.
    const double a_comm = m.layers * allreduce_s(a, hidden);
    add(m.attention_params() * bytes / a / bandwidth + a_comm, kv / std::min(a, m.kv_heads) / bandwidth);
    add(2.0 * m.attention_params() * b / a / flops + a_comm, attention_flops / a / flops);
    // FFN side: the weights the batch routes to, or its GEMMs, and its own reduction.
    const double f_comm = m.layers * allreduce_s(f, hidden);
    add(std::max(ffn_read / f / bandwidth, 2.0 * m.active_ffn_params() * b / f / flops) + f_comm,
        0.0);
    // M2N: activations to the FFN GPUs and back every layer, over the NICs.
    const double links = std::min(a, f) * params_.nic_gbps / 8 * 1e9;
    add(2.0 * m.layers * hidden / links, 0.0);
    t.fixed = 2.0 * m.layers * params_.network_latency_us * 1e-6 + host_s(batch);
    return t;
  }
  if (c.is_ep()) {
    const int groups = c.attention_groups();
    // Every GPU: its attention shard and its group's share of the KV, its experts' reads.
    add((m.attention_params() * bytes / c.tp + ffn_read / c.ep) / bandwidth,
        kv / std::min(c.tp, m.kv_heads) / groups / bandwidth);
    add(2.0 * m.active_params * b / c.gpus() / flops, attention_flops / c.tp / groups / flops);
    // Per layer: the attention all-reduce inside a group, dispatch and combine all-to-alls.
    const double routed = hidden / c.ep * std::max(1, m.experts_per_token);
    t.fixed = m.layers * (allreduce_s(c.tp, hidden / groups) + 2.0 * all_to_all_s(c.ep, routed))
              + host_s(batch);
    return t;
  }
  // TP: this GPU's weights (those the batch routes to, for MoE) and its share of the KV.
  add((m.attention_params() * bytes + ffn_read) / c.tp / bandwidth,
      kv / std::min(c.tp, m.kv_heads) / bandwidth);
  // Compute: 2 flops per active weight per token, plus QK^T and AV over every context token.
  add(2.0 * m.active_params * b / c.tp / flops, attention_flops / c.tp / flops);
  // Two all-reduces per layer (attention output, MLP output) of the batch's hidden states.
  t.fixed = 2.0 * m.layers * allreduce_s(c.tp, hidden) + host_s(batch);
  return t;
}

double engine_model::decode_step_s(const parallel_config& c, int batch, double context) const {
  if (batch <= 0)
    return 0;
  return decode_terms(c, batch).at(context);
}

double engine_model::decode_steps_s(const parallel_config& c, int batch, double context_tokens,
                                    int64_t steps) const {
  if (batch <= 0 || steps <= 0)
    return 0;
  return decode_steps_s(decode_terms(c, batch), batch, context_tokens, steps);
}

double engine_model::decode_steps_s(const step_terms& t, int batch, double context_tokens,
                                    int64_t steps) {
  if (batch <= 0 || steps <= 0)
    return 0;
  // Step i costs max_j (v_j + s_j i) + fixed: a convex function of i, so walking from i = 0
  // the dominant line only ever hands over to a steeper one.
  std::array<double, 4> v{};
  std::array<double, 4> s{};
  for (int j = 0; j < t.count; ++j) {
    v[size_t(j)] = t.lines[size_t(j)].base + t.lines[size_t(j)].per_token * context_tokens;
    s[size_t(j)] = t.lines[size_t(j)].per_token * batch;
  }
  double total = double(steps) * t.fixed;
  int64_t i = 0;
  while (i < steps) {
    const double x = double(i);
    size_t top = 0;
    for (size_t j = 1; j < size_t(t.count); ++j) {
      const double here = v[j] + s[j] * x;
      const double best = v[top] + s[top] * x;
      if (here > best || (here == best && s[j] > s[top]))
        top = j;
    }
    int64_t end = steps;
    for (size_t j = 0; j < size_t(t.count); ++j) {
      if (s[j] <= s[top])
        continue;
      // First integer step at which line j is strictly above the current top.
      const double cross = (v[top] - v[j]) / (s[j] - s[top]);
      int64_t k = std::max<int64_t>(i + 1, int64_t(std::floor(cross)) + 1);
      end = std::min(end, k);
    }
    const double n = double(end - i);
    total += n * v[top] + s[top] * (double(i + end - 1) * n / 2);
    i = end;
  }
  return total;
}

double engine_model::prefill_s(const parallel_config& c, double tokens) const {
  if (tokens <= 0)
    return 0;
  if (auto* p = profiled(c); p && p->prefill_tokens_per_s > 0)
    return tokens / p->prefill_tokens_per_s;
  const auto& m = model_;
  const double flops = gpu_.bf16_tflops * 1e12 * params_.compute_efficiency;
  const double hidden = tokens * m.d_model * m.dtype_bytes;
  if (c.is_afd()) // attention and FFN GEMMs on their own GPUs, pipelined over micro-batches
    return std::max(2.0 * m.attention_params() * tokens / c.tp / flops,
                    2.0 * m.active_ffn_params() * tokens / c.ffn_gpus / flops)
           + m.layers * allreduce_s(c.tp, hidden);
  if (c.is_ep())
    return 2.0 * m.active_params * tokens / c.gpus() / flops
           + m.layers * (allreduce_s(c.tp, hidden / c.attention_groups())
                         + 2.0 * all_to_all_s(c.ep, hidden / c.ep
                                                      * std::max(1, m.experts_per_token)));
  return 2.0 * m.active_params * tokens / c.tp / flops + 2.0 * m.layers * allreduce_s(c.tp, hidden);
}

const engine_model::step_terms& decode_terms_table::at(int batch) {
  const auto b = size_t(std::max(batch, 0));
  if (b >= terms_.size()) {
    terms_.resize(b + 1);
    known_.resize(b + 1, false);
  }
  if (!known_[b]) {
    terms_[b] = engine_->decode_terms(config_, batch);
    known_[b] = true;
  }
  return terms_[b];
}

} // namespace loom
