#pragma once
// Replay's simulated generation framework (OrchestrRL §6 on RLSim's terms), the edge of a
// deployment's gen_controller on the actor clock:
//  - its router starts a scenario's steps one after another: a step's batch goes to the
//    controller, and the next starts once the step is done and the trainer has had its share
//    of the RL step (training_s);
//  - its engines (one engine_sim per node, as `loom-example-engine` runs live) advance their
//    instances, report every instance's load each monitoring tick and the requests they
//    finish, and obey the controller's commands, answering each when its modelled duration
//    is over (a reshard once the weights are loaded).
// The controller, planner and balancer are the ones `loom serve` runs. What happened goes to
// a gen_run_log; gen_recorder fills in what the controller did.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>

#include "generation/engine_model.hpp"
#include "generation/engine_sim.hpp"
#include "protocol/actors.hpp"
#include "replay/rl_step_clock.hpp"

namespace loom::replay {

struct gen_sample {
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

/// A request's id: its step in the high 32 bits, its index in the step's batch in the low.
constexpr uint64_t request_id(uint64_t step, uint64_t index) {
  return step << 32 | index;
}

/// The sample behind a request id; nothing if the steps have no such request.
std::optional<gen_sample> sample_of(const std::vector<std::vector<gen_sample>>& steps,
                                    uint64_t id);

struct sim_generation_config {
  std::string deployment = "gen";
  int engines = 2;
  int gpus_per_engine = 8;
  parallel_config loaded{1};     // what the engines run when they start
  std::vector<std::vector<gen_sample>> steps;
  double tick_s = 1.0;           // the engines' monitoring interval
  double training_s = 0;         // between two steps (the trainer's share of an RL step)
  int off_policy_steps = 0;      // 1: the next step's generation overlaps this one's training
  engine_sim_costs costs;
  size_t curve_step = 0;         // the step whose remaining-requests curve is recorded
};

/// Migrations in the curve step are counted in bins this wide (seconds) for the report.
constexpr double migration_bin_s = 5.0;

struct gen_run_log {
  std::vector<double> makespans;            // per step, first admission to last finish
  std::vector<double> step_starts;          // per step, seconds from the run's start
  std::vector<double> forecast_histogram_error; // per step that had a forecast
  std::vector<double> forecast_mean_error;
  std::vector<double> solve_ms;             // wall clock, per planner call
  std::vector<std::pair<double, int64_t>> curve; // (seconds into curve_step, requests left)
  std::vector<std::string> timeline;        // reconfigurations, in order
  std::vector<std::pair<double, std::string>> curve_reconfigs; // in curve_step: when, "A -> B"
  std::map<int64_t, int64_t> curve_migrations; // in curve_step: per migration_bin_s, from 0
  std::vector<int64_t> step_migrations;        // per step
  struct switch_cost {                          // one reconfiguration's accounting (switched)
    double switch_s = 0;
    double kv_s = 0;
    double planned_s = 0;
  };
  std::vector<switch_cost> switches;
  int64_t reconfigurations = 0;
  int64_t migrations = 0;
  int64_t kv_transfers = 0;
  int64_t kv_recomputes = 0;
  int64_t events = 0; // messages and timers the driver ran: replay's own pace (timings.json)
  int64_t preemptions = 0;
  bool done = false;
  std::string error; // why the run stopped early
};

struct sim_generation_state {
  static inline const char* name = "simulated_generation";
  std::optional<engine_model> engine;
  sim_generation_config config;
  std::shared_ptr<gen_run_log> log;
  gen_controller_actor controller;
  caf::actor_clock::time_point origin;
  std::vector<engine_sim> engines;
  std::map<std::string, size_t> by_id;
  size_t step = 0;          // the router's next or current step
  double step_start_s = 0;
  std::optional<rl_step_clock> clock; // the trainer's turns, from the config
  bool done = false;
};

simulated_generation_actor::behavior_type
simulated_generation(simulated_generation_actor::stateful_pointer<sim_generation_state> self,
                     engine_model engine, sim_generation_config config,
                     std::shared_ptr<gen_run_log> log);

/// Fills a gen_run_log with what a deployment's controller reports as it goes (the timeline,
/// solve times, the curve, forecast errors); its counters come from its status at the end.
struct gen_recorder_state {
  static inline const char* name = "gen_recorder";
  std::shared_ptr<gen_run_log> log;
  size_t curve_step = 0;
};

gen_observer_actor::behavior_type
gen_recorder(gen_observer_actor::stateful_pointer<gen_recorder_state> self,
             std::shared_ptr<gen_run_log> log, size_t curve_step);

} // namespace loom::replay
