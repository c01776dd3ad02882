#pragma once
// `loom replay` for generation (OrchestrRL §6.2): every policy a scenario lists runs the same
// request batches in its own actor system on the virtual clock (the real gen_planner and
// balancer, a RocksDB store under DIR/store/POLICY, simulated engines). static-best is the
// best fixed deployment of one config over every config the planner may choose for a full
// batch (veRL-TO's TP sweep, and EP and AFD where the model and the cost model have them:
// the baseline is fair to the planner); static-tp8 is veRL-LO; the adaptive policies start
// from static-best's deployment. report.json depends only on the
// scenario and seed; wall-clock figures (solve times, replay time) go to timings.json.

#include <string>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "replay/gen_scenario.hpp"

namespace loom::replay {

struct gen_replay_output {
  std::string report_json;
  std::string timings_json;
  std::string summary; // a table for humans
};

caf::expected<gen_replay_output> run_gen_replay(const gen_scenario& scenario,
                                                const std::string& out_dir);

/// The best fixed deployment of the static sweep (static-best's, where the adaptive policies
/// start); the sweep's stores go under DIR/store.
caf::expected<gen_deployment> best_static_deployment(const gen_scenario& scenario,
                                                     const std::string& out_dir);

/// A policy's entry of report.json, from its run.
nlohmann::json gen_policy_json(const gen_scenario& scenario, const gen_deployment& initial,
                               const gen_run_log& log);

} // namespace loom::replay
