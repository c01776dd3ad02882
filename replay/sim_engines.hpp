#pragma once
// Replay's simulated generation engines (OrchestrRL §6 on RLSim's terms): a deployment of
// instance simulators that runs a scenario's steps one after another on the actor clock. On
// every monitoring tick it advances the instances, hands their loads to the balancer and
// applies its migrations (a running request's KV is transferred or recomputed, whichever is
// cheaper, App. A); every planner interval, and at each step's start, it sends the planner a
// snapshot and obeys its decision (the new instances start after the switching cost, with the
// moved KV). Without a planner the deployment is static and each batch is dealt round-robin,
// as a DP front end does. What happened goes to a gen_run_log.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>

#include "core/actors.hpp"
#include "generation/engine_model.hpp"
#include "generation/instance_sim.hpp"
#include "generation/kv_migration.hpp"

namespace loom::replay {

struct gen_sample {
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

struct sim_engines_config {
  gen_deployment initial;
  std::vector<std::vector<gen_sample>> steps;
  double tick_s = 1.0;           // the balancer's monitoring interval
  double plan_interval_s = 10.0; // the planner's period inside a step
  double training_s = 0;         // between two steps (the trainer's share of an RL step)
  kv_transfer_path kv_path;
  size_t curve_step = 0;         // the step whose remaining-requests curve is recorded
};

struct gen_run_log {
  std::vector<double> makespans;            // per step, first admission to last finish
  std::vector<double> forecast_histogram_error; // per step that had a forecast
  std::vector<double> forecast_mean_error;
  std::vector<double> solve_ms;             // wall clock, per planner call
  std::vector<std::pair<double, int64_t>> curve; // (seconds into curve_step, requests left)
  std::vector<std::string> timeline;        // reconfigurations, in order
  int64_t reconfigurations = 0;
  int64_t migrations = 0;
  int64_t kv_transfers = 0;
  int64_t kv_recomputes = 0;
  int64_t preemptions = 0;
  bool done = false;
  std::string error; // why the run stopped early
};

struct sim_engines_state {
  static inline const char* name = "simulated_engines";

  struct request {
    gen_sample sample;
    int instance = -1;
    bool finished = false;
    bool in_flight = false;   // its KV is on the wire to `instance`
    uint64_t flight_epoch = 0;
    sim_request flight;       // its state while in flight
  };

  std::optional<engine_model> engine;
  sim_engines_config config;
  gen_planner_actor planner;   // null: static deployment
  balancer_actor balancer;     // null: no migrations
  std::shared_ptr<gen_run_log> log;
  caf::actor_clock::time_point origin;

  gen_deployment deployment;
  uint64_t epoch = 0; // bumped by every reconfiguration; older replies are dropped
  std::vector<instance_sim> instances;
  std::vector<size_t> harvested; // finished() entries consumed, per instance
  std::vector<int64_t> preempted; // preemptions counted, per instance

  size_t step = 0;
  uint64_t first_id = 0; // ids of the step's requests are first_id + index
  std::vector<request> requests;
  size_t pending = 0;
  double step_start = 0;
  double last_finish = 0;
  double next_plan_s = 0;
  bool planning = false;
  bool balancing = false;
  std::vector<int64_t> finished_since; // output lengths since the last snapshot
  std::vector<int64_t> step_outputs;
};

simulated_engines_actor::behavior_type
simulated_engines(simulated_engines_actor::stateful_pointer<sim_engines_state> self,
                  engine_model engine, sim_engines_config config, gen_planner_actor planner,
                  balancer_actor balancer, std::shared_ptr<gen_run_log> log);

} // namespace loom::replay
