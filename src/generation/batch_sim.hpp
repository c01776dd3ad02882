#pragma once
// Continuous batching on one generation instance, as vLLM does it: waiting
// requests are admitted in order while KV blocks are free (and under max_batch), every running
// request gains one token per decode step, finished requests free their KV, and when growing
// sequences overflow the KV cache the newest running request is preempted and later recomputed.
// Used to estimate the makespan of remaining work under a parallel config (OrchestrRL §4.1).
// Event-driven: steps between two events (a finish, a KV overflow) are summed in closed form,
// so the cost grows with the number of requests, not with the tokens they generate.

#include <cstdint>
#include <vector>

#include "generation/engine_model.hpp"

namespace loom {

struct sim_request {
  int64_t context = 0;       // tokens already in the sequence (prompt + generated so far)
  int64_t remaining = 0;     // tokens still to generate
  bool kv_resident = false;  // its KV is already on this instance (no prefill needed)
};

struct instance_result {
  double makespan_s = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int peak_batch = 0;
  bool feasible = true; // false: a request's sequence can never fit the instance's KV cache
};

/// Runs the requests to completion on one `tp`-way instance, in the given (arrival) order.
instance_result simulate_instance(const engine_model& engine, int tp,
                                  const std::vector<sim_request>& requests);

/// DP instances of TP GPUs each; requests are dealt round-robin in order, as a DP front end
/// spreads a batch. The makespan is the slowest instance's.
instance_result simulate_deployment(const engine_model& engine, int tp, int dp,
                                    const std::vector<sim_request>& requests);

} // namespace loom
