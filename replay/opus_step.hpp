#pragma once
// Opus §5.2 on the virtual clock: training steps of a TorchTitan-style job (FSDP all-gather,
// lazy on downstream stages; a 1F1B pipeline with batched Send/Recv pairs and as many
// microbatches as stages; FSDP reduce-scatter; the optimizer's short all-reduce) on one
// photonic rail, run as a discrete-event simulation. Every stage runs the shim (Opus Alg. 1-3): on
// demand it writes before a phase's first operation and waits for the ACK; with provisioning
// it writes right after a phase's last operation and keeps computing; PP Send/Recv writes on
// every operation from both stages. The writes go through the rail_orchestrator the fabric
// controller runs live (the barrier, one transition at a time, O1, retries and the giant-ring
// fallback); the simulation adds what the live shims guarantee by themselves: a transition
// starts only when no communication is in flight on the stages it reprograms (G2), and no
// operation starts on a stage being reprogrammed or on a topology that does not serve it (G1).
// An apply that does not confirm within the timeout fails and is retried.

#include <cstdint>
#include <string>
#include <vector>

namespace loom::replay {

struct opus_model {
  std::string name;
  double params = 0;        // total
  double active_params = 0; // per token (MoE)
  int layers = 0;
  int hidden = 0;
};

/// Opus's models (Table 2, §3's Exp. 3, §5.3 Table 3); nothing for other names.
const opus_model* find_opus_model(const std::string& name);
/// Their names, comma separated (for errors).
std::string opus_model_names();

struct opus_workload {
  std::string name;
  opus_model model;
  int tp = 4; // inside the scale-up domain: never on the rail
  int fsdp = 2;
  int pp = 2;
  int global_batch = 16;
  int seq_len = 8192;
};

struct opus_env {
  double gpu_tflops = 312; // A100 bf16 (Perlmutter)
  double mfu = 0.4;
  double link_gbps = 200;  // per GPU NIC (Slingshot-11 Cassini)
  double ocs_latency_s = 0.05;
  double control_s = 1e-3; // one shim-controller-orchestrator round trip
  double control_per_rank_s = 0; // each further rank in a barrier (bench_topo_write)
  double ack_timeout_s = 1;
  int max_retries = 2;
  int failing_applies = 0;         // fault injection: the next N applies never confirm
  double fallback_bandwidth = 0.5; // giant ring: share of the rail per operation
  double compute_jitter = 0;       // +-fraction on every compute segment (seeded)
};

enum class opus_mode { native, on_demand, provisioning };

struct opus_interval {
  int stage = 0;
  double start = 0;
  double end = 0;
};

struct opus_run {
  double step_s = 0;      // the last step
  int reconfigs = 0;      // reconfiguration events in the last step
  int submappings = 0;    // stage sub-mappings they reprogrammed
  int suppressed = 0;     // O1: transitions with nothing to reprogram, last step
  int topo_writes = 0;    // last step
  std::vector<int> phase_boundaries; // per stage, from the learned phase table
  bool fell_back = false;
  double all_gather_bytes = 0;     // what one rank sends in its stage's FSDP all-gather
  double reduce_scatter_bytes = 0; // and in its reduce-scatter ((d-1)/d of the stage's shard)
  std::vector<opus_interval> comms;  // every operation on the rail, per stage
  std::vector<opus_interval> reprograms; // every stage sub-mapping under reconfiguration
};

opus_run simulate_opus(const opus_workload& w, const opus_env& env, opus_mode mode, int steps = 3,
                       uint64_t seed = 1);

} // namespace loom::replay
