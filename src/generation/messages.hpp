#pragma once
// What the generation engines, the planner and the balancer tell each other (OrchestrRL §4,
// Algorithm 1): progress snapshots up, plans and migrations down.

#include <cstdint>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "generation/config_search.hpp"
#include "generation/load_index.hpp"

namespace loom {

/// A pending request as the engines see it: how far it has got, never how long it will be.
struct gen_pending {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  int32_t instance = -1; // -1: not placed yet (a new step's batch)
};

/// The deployment's state for the planner. A new `step` starts a new batch: its requests are
/// all pending with nothing generated, and the planner forecasts their lengths.
struct gen_snapshot {
  uint64_t step = 0;
  gen_deployment deployment;
  std::vector<gen_pending> pending;
  std::vector<int64_t> finished_outputs; // output lengths finished since the last snapshot
};

/// The planner's answer: keep (reconfigure false; `assignment` places unplaced requests) or
/// switch to `deployment` with every pending request re-placed.
struct gen_decision {
  gen_deployment deployment;
  std::vector<int32_t> assignment; // instance per snapshot entry, in snapshot order
  bool reconfigure = false;
  double objective_s = 0; // Eq. 1 of the chosen deployment, costs included
  double current_s = 0;   // Obj_cur
  double switch_s = 0;    // C_sw
  double migrate_s = 0;   // C_mig
  double solve_ms = 0;    // wall-clock time of the search (a measurement, not an input)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, parallel_config& x) {
  return f(caf::meta::type_name("parallel_config"), x.tp, x.ep, x.ffn_gpus);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_deployment& x) {
  return f(caf::meta::type_name("gen_deployment"), x.parallel, x.instances);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_pending& x) {
  return f(caf::meta::type_name("gen_pending"), x.id, x.prompt_tokens, x.generated, x.instance);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_snapshot& x) {
  return f(caf::meta::type_name("gen_snapshot"), x.step, x.deployment, x.pending,
           x.finished_outputs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_decision& x) {
  return f(caf::meta::type_name("gen_decision"), x.deployment, x.assignment, x.reconfigure,
           x.objective_s, x.current_s, x.switch_s, x.migrate_s, x.solve_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_request& x) {
  return f(caf::meta::type_name("gen_request"), x.id, x.context_tokens, x.pinned);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gen_worker& x) {
  return f(caf::meta::type_name("gen_worker"), x.id, x.running, x.waiting, x.kv_free_tokens,
           x.max_batch, x.decode_rate_tps);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, migration& x) {
  return f(caf::meta::type_name("migration"), x.request, x.from, x.to, x.was_waiting);
}

} // namespace loom
