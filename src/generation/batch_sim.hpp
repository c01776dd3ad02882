#pragma once
// Makespan of a set of requests on one instance, or on DP instances alike, run to
// completion by the continuous-batching simulator (OrchestrRL §4.1: T_k(R_k, y_k)).

#include <cstdint>
#include <limits>
#include <vector>

#include "generation/instance_sim.hpp"

namespace loom {

struct instance_result {
  double makespan_s = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int peak_batch = 0;
  bool feasible = true; // false: a request's sequence can never fit the instance's KV cache
};

/// Runs the requests to completion on one instance, in the given (arrival) order.
/// `terms`: the config's decode_terms_table, if several simulations share one. A run still
/// going at `give_up_s` stops there with an infinite makespan: a caller that only asks whether
/// the makespan is under a bar need not simulate past it. Under the bar the result is exact.
/// `finishes`, if given, gets each finished request's time appended.
instance_result simulate_instance(const engine_model& engine, const parallel_config& config,
                                  const std::vector<sim_request>& requests,
                                  decode_terms_table* terms = nullptr,
                                  double give_up_s = std::numeric_limits<double>::infinity(),
                                  std::vector<double>* finishes = nullptr);

/// DP instances of one config; requests are dealt round-robin in order, as a DP front end
/// spreads a batch. The makespan is the slowest instance's.
instance_result simulate_deployment(const engine_model& engine, const parallel_config& config,
                                    int dp,
                                    const std::vector<sim_request>& requests);

} // namespace loom
