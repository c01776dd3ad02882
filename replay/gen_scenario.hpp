#pragma once
// A generation replay scenario (TOML, kind = "generation"): one deployment, the steps'
// request batches, the policies to compare, and the planner's and balancer's knobs.
//
//   [scenario]   name, kind = "generation", seed or seeds, policies = ["static-best", "static-tp8",
//                "planner-only", "balancer-only", "orchestr"]
//   [deployment] model (OrchestrRL Table 3), gpu, gpus, gpus_per_node, profile (an engine
//                profile file: measured step times replacing the roofline),
//                memory_utilization (vLLM's gpu_memory_utilization; lower: KV pressure),
//                step_timeout_s (a step still unfinished then ends the run)
//   [planner]    interval_s, epsilon_s, bin_tokens, forecast_window, kv_balance_delta,
//                weight_load_gbps, engine_restart_s, standby_restart_s
//   [balancer]   tick_s, theta
//   [kv]         nic_gbps, nics (the KV transfer path of migrations, App. A)
//   [workload]   steps, batch, max_tokens, training_s, off_policy_steps (0: synchronous, 1:
//                one-step asynchronous), curve_step, dispatch ("round-robin"
//                or "contiguous"); a generator (prompt_min, prompt_max, median_tokens, sigma,
//                drift_per_step, group_size, group_correlation) or trace = "FILE.csv" with
//                output_scale and prompt_scale

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generation/config_search.hpp"
#include "generation/deployment_config.hpp"
#include "generation/load_index.hpp"
#include "generation/model_catalog.hpp"
#include "replay/gen_workload.hpp"
#include "replay/scenario_file.hpp"
#include "replay/sim_generation.hpp"
#include "types/config_error.hpp"
#include "types/gpu.hpp"

namespace loom::replay {

/// Policy names a generation scenario may list, in report order.
const std::vector<std::string>& gen_policy_names();

struct gen_scenario {
  std::string name;
  std::string source;
  uint64_t seed = 1;
  std::vector<uint64_t> seeds; // one replay each; the report gives mean, min and max
  std::vector<std::string> policies;
  model_spec model;
  gpu_spec gpu;
  int gpus = 16;
  std::shared_ptr<const engine_profile> profile; // null: the roofline
  std::string profile_name; // as the scenario names it
  std::string profile_path; // resolved
  double memory_utilization = 0.9; // lower it for KV pressure
  double step_timeout_s = 3600;    // serve's deployment key: a config whose step outlasts it
                                   // fails its run (a static one drops out of the sweep)
  planner_params planner;
  double plan_interval_s = 10;
  int bin_tokens = 256;
  size_t forecast_window = 32;
  balancer_params balancer;
  double tick_s = 1;
  int64_t max_tokens = 16384;
  double training_s = 0;
  int off_policy_steps = 0; // 1: a step's generation overlaps the previous step's training
  dispatch_mode dispatch = dispatch_mode::round_robin; // the framework's, without a planner
  size_t curve_step = 0;
  std::string workload_source; // what made the batches, with any scaling
  std::optional<gen_length_generator> generator; // when it made them (a trace does not)
  std::vector<std::vector<gen_sample>> steps;
  /// What the paper reports for this setting, to print beside the replay's figure.
  struct paper_figure {
    double orchestr_vs_static_best = 0;
    std::string source; // where in the paper, and how it differs from what replay measures
  };
  std::optional<paper_figure> paper;
};

scenario_result<gen_scenario> load_gen_scenario(const std::string& path);

/// The scenario under another seed: a generated workload is drawn again from it (a trace
/// replays the same rows).
gen_scenario with_seed(const gen_scenario& sc, uint64_t seed);

/// The engine model of the scenario's deployment: its profile, else the roofline.
engine_model engine_of(const gen_scenario& sc);

/// GPUs of one engine (a node's server) in the scenario's deployment.
int engine_gpus(const gen_scenario& sc);

/// The deployment a policy runs, as `loom serve` would be configured for it: the scenario's
/// model, GPUs and knobs, starting from `initial`, with the planner and balancer on or off.
deployment_config deployment_for(const gen_scenario& sc, const parallel_config& initial,
                                 bool planner, bool balancer);

/// The simulated framework of a run: one engine per node, running `loaded` at start.
sim_generation_config framework_for(const gen_scenario& sc, const parallel_config& loaded);

} // namespace loom::replay
