#pragma once
// How one generation instance is parallelised (OrchestrRL §4.1's y_k): tensor parallelism,
// expert parallelism for MoE models, or attention-FFN disaggregation.

#include <string>

namespace loom {

struct parallel_config {
  int tp = 1;       // tensor-parallel degree of attention (and of the FFN under plain TP)
  int ep = 0;       // EP: the experts are spread over `ep` GPUs, attention runs tp-way in
                    // ep / tp data-parallel groups; 0 = no EP
  int ffn_gpus = 0; // AFD: attention on `tp` GPUs, the FFN on `ffn_gpus` more; 0 = no AFD

  parallel_config() = default;
  parallel_config(int tensor_parallel) : tp(tensor_parallel) {} // NOLINT: a plain TP degree

  static parallel_config expert_parallel(int ep, int attention_tp);
  static parallel_config disaggregated(int attention_gpus, int ffn_gpus);

  bool is_ep() const { return ep > 0; }
  bool is_afd() const { return ffn_gpus > 0; }
  int gpus() const;
  /// Attention data-parallel groups inside the instance (EP), else 1.
  int attention_groups() const { return is_ep() ? ep / tp : 1; }
  /// "TP4", "EP16/TP2", "AFD4:2".
  std::string name() const;

  friend bool operator==(const parallel_config&, const parallel_config&) = default;
};

} // namespace loom
