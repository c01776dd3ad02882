#pragma once
// Cost of one generation instance (OrchestrRL §2.1, §4.1; DESIGN "Replay"): a roofline over the
// instance's GPUs. A decode step reads the weights and the batch's KV cache from HBM or is
// compute bound, whichever is slower, plus the parallelism's communication and the host's
// per-step work, which grows with the batch. Pure: no clock, no I/O.
//
// Three ways to parallelise an instance (parallel_config):
// - TP: weights and KV heads split tp ways; two all-reduces per layer over NVLink.
// - EP (MoE): experts spread over ep GPUs, attention tp-way in ep / tp data-parallel groups;
//   a step reads only the experts some token is routed to, plus a dispatch and a combine
//   all-to-all per layer (over NVLink inside a node, the NICs beyond).
// - AFD: attention (and the KV cache) on tp GPUs, the FFN on ffn_gpus GPUs, micro-batches
//   ping-ponging between them (MegaScale-Infer style): the step is paced by the slowest of
//   attention, FFN and the M2N transfer, which overlap, plus the per-layer network latency
//   that cannot be hidden. Large batches hide the communication; the tail does not.
//
// A measured profile (engine_profile) replaces the roofline for the configs it lists: their
// decode step, prefill and KV capacity come from it.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "generation/engine_profile.hpp"
#include "generation/model_catalog.hpp"
#include "types/generation.hpp"
#include "types/gpu.hpp"

namespace loom {

struct engine_params {
  double hbm_efficiency = 0.8;      // fraction of datasheet HBM bandwidth decode kernels reach
  double compute_efficiency = 0.5;  // fraction of datasheet BF16 TFLOPS GEMMs reach
  double allreduce_latency_us = 25; // per NCCL all-reduce (or all-to-all) call, before bandwidth
  double step_overhead_ms = 3.0;    // host work per decode step: scheduling, launch, sampling
  double per_request_overhead_us = 25; // host work per running request per step
  double memory_utilization = 0.9;  // share of HBM the engine may use (vLLM's default)
  double activation_reserve_gb = 4; // per GPU, kept free of KV for activations and graphs
  int max_batch = 256;              // running requests per scheduler (vLLM max_num_seqs)
  int gpus_per_node = 8;            // EP wider than a node crosses the NICs
  double nic_gbps = 400;            // per GPU, for cross-node EP and AFD's M2N traffic
  double network_latency_us = 10;   // per cross-node transfer, paid per layer by AFD
};

class engine_model {
public:
  engine_model(model_spec model, gpu_spec gpu, engine_params params = {},
               std::shared_ptr<const engine_profile> profile = nullptr);

  /// Weight bytes the fullest GPU of an instance holds.
  double weight_bytes_per_gpu(const parallel_config& c) const;

  /// Running requests an instance admits: one scheduler's max_batch, per attention group
  /// under EP (each data-parallel rank schedules its own), and for each of AFD's two
  /// ping-ponging micro-batches.
  int max_batch(const parallel_config& c) const;

  /// KV-cache tokens an instance can hold; 0 when its weights do not fit.
  int64_t kv_capacity_tokens(const parallel_config& c) const;

  /// Seconds for one decode step of an instance running `batch` requests whose sequences
  /// hold `context_tokens` tokens in total.
  double decode_step_s(const parallel_config& c, int batch, double context_tokens) const;

  /// A decode step as a function of the batch's total context C, for a fixed config and
  /// batch: the largest of a few lines base + per_token C (memory, compute, and under AFD the
  /// FFN side and the transfer), plus a fixed part.
  struct line {
    double base = 0;
    double per_token = 0;
  };
  struct step_terms {
    std::array<line, 4> lines{};
    int count = 0;
    double fixed = 0; // unhidden communication and host work
    double at(double context_tokens) const;
  };
  step_terms decode_terms(const parallel_config& c, int batch) const;

  /// Seconds for `steps` consecutive decode steps at a constant batch whose context starts at
  /// `context_tokens` and grows by `batch` tokens a step; exact, in O(lines).
  double decode_steps_s(const parallel_config& c, int batch, double context_tokens,
                        int64_t steps) const;
  /// The same from terms already computed for the config and batch.
  static double decode_steps_s(const step_terms& terms, int batch, double context_tokens,
                               int64_t steps);

  /// Seconds to prefill `tokens` prompt (or recomputed context) tokens.
  double prefill_s(const parallel_config& c, double tokens) const;

  /// Seconds for one ring all-reduce of `bytes` across `tp` GPUs (0 if 1): over NVLink
  /// inside a node, over the NICs beyond.
  double allreduce_s(int tp, double bytes) const;

  /// Seconds for one all-to-all in which each of `ep` GPUs sends `bytes_per_gpu`.
  double all_to_all_s(int ep, double bytes_per_gpu) const;

  const model_spec& model() const { return model_; }
  const gpu_spec& gpu() const { return gpu_; }
  const engine_params& params() const { return params_; }
  /// The measured profile, or null: the roofline throughout.
  const engine_profile* profile() const { return profile_.get(); }
  /// Whether `c` is scored by the source every other config is: the profile lists it, or
  /// there is no profile. Configs are compared on one cost model, never a profiled TP beside
  /// a roofline AFD (the roofline's error is not the profile's).
  bool comparable(const parallel_config& c) const { return !profile_ || profiled(c); }

private:
  const profiled_config* profiled(const parallel_config& c) const {
    return profile_ ? profile_->find(c) : nullptr;
  }

  double usable_hbm_bytes() const;
  double host_s(int batch) const;

  model_spec model_;
  gpu_spec gpu_;
  engine_params params_;
  std::shared_ptr<const engine_profile> profile_;
};

/// One config's decode_terms by batch size, each computed on first use: the planner simulates
/// hundreds of instances of a config per candidate, and each batch size recurs in all of them.
/// Not thread-safe: it belongs to one search.
class decode_terms_table {
public:
  decode_terms_table(const engine_model& engine, const parallel_config& config)
    : engine_(&engine), config_(config) {}
  const engine_model::step_terms& at(int batch);

private:
  const engine_model* engine_;
  parallel_config config_;
  std::vector<engine_model::step_terms> terms_; // by batch
  std::vector<bool> known_;
};

} // namespace loom
