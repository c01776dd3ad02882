#pragma once
// Cost of one generation instance (OrchestrRL §2.1, §4.1; DESIGN "Replay"): a roofline over the
// instance's GPUs. A decode step reads the weights and the batch's KV cache from HBM or is
// compute bound, whichever is slower, plus two tensor-parallel all-reduces per layer over
// NVLink and the host's per-step work, which grows with the batch. Pure: no clock, no I/O.
//
// This covers tensor parallelism (MoE models by their active parameters). Expert parallelism
// and attention-FFN disaggregation are not modelled yet.

#include <cstdint>

#include "core/gpu.hpp"
#include "generation/model_catalog.hpp"

namespace loom {

struct engine_params {
  double hbm_efficiency = 0.8;      // fraction of datasheet HBM bandwidth decode kernels reach
  double compute_efficiency = 0.5;  // fraction of datasheet BF16 TFLOPS GEMMs reach
  double allreduce_latency_us = 25; // per NCCL all-reduce call on NVLink, before bandwidth
  double step_overhead_ms = 3.0;    // host work per decode step: scheduling, launch, sampling
  double per_request_overhead_us = 25; // host work per running request per step
  double memory_utilization = 0.9;  // share of HBM the engine may use (vLLM's default)
  double activation_reserve_gb = 4; // per GPU, kept free of KV for activations and graphs
  int max_batch = 256;              // running requests per instance (vLLM max_num_seqs)
};

class engine_model {
public:
  engine_model(model_spec model, gpu_spec gpu, engine_params params = {});

  /// Weight bytes each GPU of a `tp`-way instance holds.
  double weight_bytes_per_gpu(int tp) const;

  /// KV-cache tokens a `tp`-way instance can hold; 0 when the weights do not fit.
  int64_t kv_capacity_tokens(int tp) const;

  /// Seconds for one decode step of a `tp`-way instance running `batch` requests whose
  /// sequences hold `context_tokens` tokens in total.
  double decode_step_s(int tp, int batch, double context_tokens) const;

  /// A decode step as a function of the batch's total context C, for fixed TP and batch:
  /// max(memory_base + memory_per_token C, compute_base + compute_per_token C) + fixed.
  struct step_terms {
    double memory_base = 0;
    double memory_per_token = 0;
    double compute_base = 0;
    double compute_per_token = 0;
    double fixed = 0; // all-reduces and host work
    double at(double context_tokens) const;
  };
  step_terms decode_terms(int tp, int batch) const;

  /// Seconds for `steps` consecutive decode steps at a constant batch whose context starts at
  /// `context_tokens` and grows by `batch` tokens a step; exact, in O(1).
  double decode_steps_s(int tp, int batch, double context_tokens, int64_t steps) const;

  /// Seconds to prefill `tokens` prompt (or recomputed context) tokens.
  double prefill_s(int tp, double tokens) const;

  /// Seconds for one ring all-reduce of `bytes` across `tp` GPUs (0 when tp == 1).
  double allreduce_s(int tp, double bytes) const;

  const model_spec& model() const { return model_; }
  const gpu_spec& gpu() const { return gpu_; }
  const engine_params& params() const { return params_; }

private:
  model_spec model_;
  gpu_spec gpu_;
  engine_params params_;
};

} // namespace loom
