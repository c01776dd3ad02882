#pragma once
// The gen_planner actor (OrchestrRL §4.1, Algorithm 1 event 1): a thin shell around
// remaining_workload (forecast and histogram) and plan_generation (the config search). A
// reconfiguration is written to the store before it is answered.

#include <optional>
#include <string>

#include "core/actors.hpp"
#include "generation/config_search.hpp"
#include "generation/engine_model.hpp"
#include "generation/remaining_workload.hpp"

namespace loom {

struct gen_planner_config {
  std::string deployment = "gen"; // the subject of its persisted events
  int gpu_budget = 8;
  int64_t max_tokens = 16384;     // the steps' maximum response length
  int bin_tokens = 256;           // §4.1's default bin width
  size_t forecast_window = 32;    // steps the ARIMA models are fitted on
  planner_params params;
  bool profile_afd = true;        // profile AFD splits at start when params lists none
  bool sync_writes = true;
};

struct gen_planner_state {
  static inline const char* name = "gen_planner";
  std::optional<engine_model> engine;
  gen_planner_config config;
  std::optional<remaining_workload> workload;
  store_actor store;
};

gen_planner_actor::behavior_type
gen_planner(gen_planner_actor::stateful_pointer<gen_planner_state> self, engine_model engine,
            gen_planner_config config, store_actor store);

} // namespace loom
