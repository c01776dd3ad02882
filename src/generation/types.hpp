#pragma once
// OrchestrRL's plain data (no CAF): how an instance is parallelised, a deployment of
// instances, and what the engines, the planner and the balancer tell each other (§4,
// Algorithm 1): progress snapshots up, plans and migrations down.

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// How one generation instance is parallelised (OrchestrRL §4.1's y_k): tensor parallelism,
/// expert parallelism for MoE models, or attention-FFN disaggregation.
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

/// A homogeneous deployment: `instances` instances of one parallel config.
struct gen_deployment {
  parallel_config parallel;
  int instances = 0;
  /// "4xTP2", "2xAFD4:4".
  std::string name() const;
  friend bool operator==(const gen_deployment&, const gen_deployment&) = default;
};

/// A pending request as the engines see it: how far it has got, never how long it will be.
struct gen_pending {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  int32_t instance = -1; // -1: not placed yet (a new step's batch)
};

/// The deployment's state for the planner. A new `step` starts a new batch: its requests are
/// all pending with nothing generated, and the planner forecasts their lengths.
struct gen_snapshot {
  uint64_t step = 0;
  gen_deployment deployment;
  std::vector<gen_pending> pending;
  std::vector<int64_t> finished_outputs; // output lengths finished since the last snapshot
};

/// The planner's answer: keep (reconfigure false; `assignment` places unplaced requests) or
/// switch to `deployment` with every pending request re-placed.
struct gen_decision {
  gen_deployment deployment;
  std::vector<int32_t> assignment; // instance per snapshot entry, in snapshot order
  bool reconfigure = false;
  double objective_s = 0; // Eq. 1 of the chosen deployment, costs included
  double current_s = 0;   // Obj_cur
  double switch_s = 0;    // C_sw
  double migrate_s = 0;   // C_mig
  double solve_ms = 0;    // wall-clock time of the search (a measurement, not an input)
};

/// A request as the balancer sees it.
struct gen_request {
  uint64_t id = 0;
  int64_t context_tokens = 0; // KV footprint if moved
  bool pinned = false;        // moved lately: not again yet, so requests do not ping-pong
};

/// A generation instance's load on one monitoring tick (OrchestrRL §4.2).
struct gen_worker {
  uint32_t id = 0;
  std::vector<gen_request> running;
  std::vector<gen_request> waiting;
  int64_t kv_free_tokens = 0;  // KV headroom right now (M_free, in tokens)
  int max_batch = 256;         // the engine's concurrency limit
  double decode_rate_tps = 0;  // observed decode rate of one running request (tokens/s): a
                               // busy worker's per-request pace, not its summed throughput
};

/// One request moved by the balancer.
struct migration {
  uint64_t request = 0;
  uint32_t from = 0;
  uint32_t to = 0;
  bool was_waiting = false;
};

} // namespace loom
