#pragma once
// One generation deployment run on the virtual clock, as `loom serve` runs it: the real
// gen_controller with its planner and balancer (each optional) over a RocksDB store, against
// replay's simulated generation framework (router and engines).

#include <string>

#include <caf/expected.hpp>

#include "generation/deployment_config.hpp"
#include "generation/engine_model.hpp"
#include "replay/sim_generation.hpp"

namespace loom::replay {

struct gen_run_spec {
  deployment_config deployment;  // planner_enabled, balancer_enabled choose the policy
  sim_generation_config sim;
  std::string store_dir;         // made afresh
};

/// Runs every step; an error if the run stopped before its last step.
caf::expected<gen_run_log> run_generation(const engine_model& engine, const gen_run_spec& spec);

} // namespace loom::replay
