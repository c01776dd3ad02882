#pragma once
// A fabric replay scenario (TOML, kind = "fabric"): any of these sections, each reported:
//
//   [scenario]        name, kind = "fabric", seed or seeds
//   [fabric]          a regular RFabric shape (pods, racks_per_pod, servers_per_rack,
//                     gpus_per_server, tor_uplinks, boundary_ports, core_devices, link_gbps,
//                     agg_reconfig_ms, core_reconfig_ms) for [[collectives]] and [rl]
//   [[collectives]]   OrchestrRL Fig. 23: name, kind (all-to-all | all-reduce | all-gather |
//                     reduce-scatter), layout ("EP64_DP2"), domain ("EP"), gb_per_rank,
//                     expert_skew, paper_reduction
//   [collectives_sweep] the plausible fabrics around [fabric] for Fig. 23's ranges:
//                     tor_uplinks = [..], servers_per_rack = [..] (racks follow, the servers
//                     stay), placements = ["linear", "random"]
//   [cost]            OrchestrRL Fig. 15: endpoints, switch_radix, link_gbps = [..],
//                     oversubscription, tor_uplink_ratio, boundary_ratio, paper_rfabric_ratio
//   [opus]            Opus Table 2, §5.3: ocs_latency_ms, control_ms, control_per_rank_ms,
//                     gpu_tflops, mfu, link_gbps, steps, and [[opus.configs]] name, model,
//                     global_batch, seq_len, tp, fsdp, pp, paper_on_demand,
//                     paper_provisioning, paper_reconfigs, paper_control_on_demand,
//                     paper_control_provisioning, and any of [opus]'s cluster keys
//   [weight_sync]     OrchestrRL App. E: shard_gb, holders, gen_pods, receivers_per_pod,
//                     pod_budget, seeds_per_pod, fanout, cross_link_gbps
//   [moe]             mFabric §5.1, App. B: drifting expert popularity on one regional OCS:
//                     servers, gpus_per_server, ocs_nics, link_gbps, layers, iterations,
//                     window, decay, tokens, gb_per_rank, popularity_drift, skew,
//                     transition_sharpness, traffic ("markov", "zipf-bursts"),
//                     zipf_exponent, affinity, capacity_factor, popularity_swaps,
//                     burst_rate, burst_iterations, burst_factor
//   [moe_sweep]       servers = [..], ocs_nics = [..], iterations: [moe] on other shapes
//   [rl]              the fabric controller actor over RL iterations on [fabric]: iterations,
//                     ep, dp (ranks = ep x dp), gb_a2a, gb_grad, gb_weights, compute_s,
//                     gen_ranks

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/cost_model.hpp"
#include "fabric/shape.hpp"
#include "replay/fabric_collectives.hpp"
#include "replay/fabric_moe.hpp"
#include "replay/opus_step.hpp"
#include "replay/scenario_file.hpp"

namespace loom::replay {

struct cost_section {
  network_design design;
  std::vector<double> link_gbps{200, 400};
  std::vector<double> paper_rfabric_ratio;
};

/// Fig. 23's sweep: every combination of these around [fabric] (whose point is the marked one).
struct collectives_sweep {
  std::vector<int> tor_uplinks;
  std::vector<int> servers_per_rack;
  std::vector<rank_placement> placements{rank_placement::linear};
};

/// The regional shapes around [moe]'s that its forecasts are also timed on: where
/// prediction pays (every servers x ocs_nics pair; a server's GPUs stay).
struct moe_shape_sweep {
  std::vector<int> servers;
  std::vector<int> ocs_nics;
  int iterations = 10;
};

/// One Table 2 configuration and what the paper reports for it (absent: not reported).
struct opus_config_entry {
  opus_workload workload;
  opus_env env; // [opus]'s, with the config's own keys over it
  std::optional<double> paper_on_demand;      // step time / native at the OCS latency
  std::optional<double> paper_provisioning;
  std::optional<int> paper_reconfigs;
  std::optional<double> paper_control_on_demand;     // overhead at 0 ms (Fig. 11)
  std::optional<double> paper_control_provisioning;
};

struct opus_section {
  opus_env env;
  int steps = 3;
  std::vector<opus_config_entry> configs;
};

struct weight_sync_section {
  double shard_gb = 10;
  uint32_t holders = 8;
  uint32_t gen_pods = 3;
  uint32_t receivers_per_pod = 64;
  uint32_t pod_budget = 4;
  uint32_t seeds_per_pod = 2;
  uint32_t fanout = 2;
  double link_gbps = 200;
  double cross_link_gbps = 20; // WEAVE's testbed link, for one-copy-then-broadcast
};

struct rl_section {
  int iterations = 3;
  int ep = 8;
  int dp = 2;
  double gb_a2a = 1;
  double gb_grad = 10;
  double gb_weights = 10;
  double compute_s = 1;     // the collective-free window before each period
  int gen_ranks = 16;       // the Gen deployment, ranks after the Train ranks
};

struct fabric_scenario {
  std::string name;
  std::string source;
  uint64_t seed = 1;
  std::vector<uint64_t> seeds; // more than one: a report per seed, the collectives' spread
  rfabric_shape shape;
  std::vector<collective_setup> collectives;
  collectives_sweep sweep;
  std::optional<cost_section> cost;
  std::optional<opus_section> opus;
  std::optional<weight_sync_section> weight_sync;
  std::optional<rl_section> rl;
  std::optional<moe_setup> moe;
  moe_shape_sweep moe_sweep;
  std::vector<std::string> policies; // the sections present, in report order
};

scenario_result<fabric_scenario> load_fabric_scenario(const std::string& path);

} // namespace loom::replay
