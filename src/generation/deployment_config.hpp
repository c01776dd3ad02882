#pragma once
// One generation deployment as an operator configures it ([[generation.deployments]]): the
// model and GPUs it serves with, the parallel config it starts from, and the knobs of its
// planner (OrchestrRL §4.1), balancer (§4.2) and command handling. `loom serve` hosts a
// planner, a balancer and a controller per deployment.

#include <cstdint>
#include <memory>
#include <string>

#include "generation/config_search.hpp"
#include "generation/engine_model.hpp"
#include "generation/engine_profile.hpp"
#include "generation/load_index.hpp"
#include "types/generation.hpp"

namespace loom {

struct deployment_config {
  std::string name;
  std::string model;          // OrchestrRL Table 3 (model_catalog)
  std::string gpu;            // a GPU type of the cluster's catalog
  int gpus = 8;               // the budget: at most this many GPUs of engines serve it
  std::string profile_path;   // measured step times (engine_profile); empty: the roofline
  std::shared_ptr<const engine_profile> profile;
  double memory_utilization = 0.9; // share of HBM the engines give weights and KV (vLLM's)
  parallel_config initial{1}; // laid out over the engines as they register
  int64_t max_tokens = 16384; // the steps' maximum response length
  bool planner_enabled = true;  // false: the layout stays as configured
  bool balancer_enabled = true;
  dispatch_mode dispatch = dispatch_mode::round_robin; // placement without the planner
  double period_s = 30;       // planning period inside a step (§4.1)
  double tick_s = 0.5;        // monitoring tick: engines report, the balancer runs (§4.2)
  int bin_tokens = 256;       // the remaining-workload histogram's bins (§4.1)
  size_t forecast_window = 32;
  planner_params planner;     // epsilon, KV balance, C_sw and C_mig cost model, gpus_per_node
  balancer_params balancer;   // theta
  // An engine must answer a command within the timeout (a reshard within its own, as loading
  // weights takes long); a command is sent again `command_retries` times, then abandoned and
  // its engine treated as lost: its instances leave the layout, its requests are re-placed.
  double command_timeout_s = 10;
  double reshard_timeout_s = 600;
  int command_retries = 2;
  // A step not finished this long after it started is aborted (its router hears why), so a
  // step that can never finish (no layout left that fits, requests no engine reports) does not
  // hold the deployment for good.
  double step_timeout_s = 3600;

  /// GPUs of one engine (a node's server).
  int gpus_per_engine() const { return planner.gpus_per_node; }
};

/// The engine model's knobs a deployment sets.
inline engine_params engine_params_of(const deployment_config& d) {
  engine_params p;
  p.memory_utilization = d.memory_utilization;
  p.gpus_per_node = d.planner.gpus_per_node;
  return p;
}

} // namespace loom
