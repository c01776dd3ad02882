#pragma once
// The gen_controller actor: one per generation deployment, a thin shell around
// deployment_runtime (OrchestrRL Alg. 1 over real engines). It feeds the runtime what the
// engines and the router say, asks the planner (Event 1) and the balancer (Event 2) when the
// runtime wants them, and makes every decision durable before the engines hear of it: the
// deployment's record (layout, step, commands in flight) is written, then the commands go
// out, in order. Finished requests are durable before the engine is answered. Live, its edge
// is the gateway; in replay, the simulated generation framework.

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/typed_response_promise.hpp>

#include "generation/deployment_runtime.hpp"
#include "generation/engine_model.hpp"
#include "protocol/actors.hpp"

namespace loom {

/// Whom the controller works with.
struct gen_controller_links {
  store_actor store;
  engine_edge_actor edge;
  gen_planner_actor planner;   // null: a static layout
  balancer_actor balancer;     // null: no migrations
  gen_observer_actor observer; // null: nobody watches
  bool sync_writes = true;
};

/// What the store kept of the deployment (nothing on a first start).
struct gen_controller_restore {
  std::optional<deployment_record> record;
  std::optional<step_record> step;
  std::vector<request_done> finished;
};

struct gen_controller_state {
  static inline const char* name = "gen_controller";
  std::optional<engine_model> engine;
  std::optional<deployment_runtime> runtime;
  gen_controller_links links;
  caf::actor_clock::time_point origin;
  uint64_t alarm = 0;               // version of the armed alarm
  std::optional<double> alarm_at;
  // Commands wait for the write before them: a batch goes out once its write (and every
  // earlier one) is durable.
  struct outgoing {
    std::vector<gen_command> commands;
    bool durable = false;
  };
  std::deque<outgoing> outgoing;
  std::vector<caf::typed_response_promise<step_placement>> routers; // waiting for placement
  double last_forecast_error = -1;
  std::map<std::string, double> stats_refused_at; // per engine: when its refusal was logged
};

gen_controller_actor::behavior_type
gen_controller(gen_controller_actor::stateful_pointer<gen_controller_state> self,
               engine_model engine, deployment_config config, gen_controller_links links,
               gen_controller_restore restored);

} // namespace loom
