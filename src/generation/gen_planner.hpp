#pragma once
// The gen_planner actor (OrchestrRL §4.1, Algorithm 1 event 1): a thin shell around
// remaining_workload (forecast and histogram) and plan_generation (the config search). It
// decides; its deployment's controller makes a decision durable before any engine hears of
// it. At each step's end the forecaster learns the step's lengths and its history is written
// to the store, so a restarted service forecasts from the same steps.

#include <optional>
#include <string>
#include <vector>

#include "generation/config_search.hpp"
#include "generation/deployment_config.hpp"
#include "generation/engine_model.hpp"
#include "generation/plan_error.hpp"
#include "generation/remaining_workload.hpp"
#include "protocol/actors.hpp"

namespace loom {

struct gen_planner_config {
  std::string deployment = "gen"; // the key of its forecaster history
  int gpu_budget = 8;             // when a snapshot does not say (its engines' GPUs)
  int64_t max_tokens = 16384;     // the steps' maximum response length
  int bin_tokens = 256;           // §4.1's default bin width
  size_t forecast_window = 32;    // steps the ARIMA models are fitted on
  planner_params params;
  bool profile_afd = true;        // profile AFD splits at start when params lists none
  bool sync_writes = true;
};

/// A deployment's planner, as configured.
gen_planner_config planner_config_of(const deployment_config& d, bool sync_writes);

struct gen_planner_state {
  static inline const char* name = "gen_planner";
  std::optional<engine_model> engine;
  gen_planner_config config;
  std::optional<remaining_workload> workload;
  plan_error error;               // what its step predictions err by
  store_actor store;
};

/// `kept`: what the store kept of the planner (empty on a first start).
gen_planner_actor::behavior_type
gen_planner(gen_planner_actor::stateful_pointer<gen_planner_state> self, engine_model engine,
            gen_planner_config config, store_actor store, gen_forecast kept);

} // namespace loom
