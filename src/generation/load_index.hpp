#pragma once
// Reactive balancing (OrchestrRL §4.2, Eq. 5, Alg. 1 event 2), pure: rank generation workers by
// LoadIndex_w = (|Q_run| + |Q_wait|) / B_cap(M_free) x 1 / R~_w and move requests from the most
// to the least congested while the gap exceeds theta, waiting queue first and shortest context
// first, only where the destination keeps its stable batch.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom {

struct gen_request {
  uint64_t id = 0;
  int64_t context_tokens = 0; // KV footprint if moved
  bool pinned = false;        // moved lately: not again yet, so requests do not ping-pong
};

struct gen_worker {
  uint32_t id = 0;
  std::vector<gen_request> running;
  std::vector<gen_request> waiting;
  int64_t kv_free_tokens = 0;  // KV headroom right now (M_free, in tokens)
  int max_batch = 256;         // the engine's concurrency limit
  double decode_rate_tps = 0;  // observed decode rate of one running request (tokens/s): a
                               // busy worker's per-request pace, not its summed throughput
};

struct balancer_params {
  double theta = 0.05;               // stop once max - min LoadIndex <= theta (§4.2 gives no
                                     // value; replay of gen-qwen14b-25k: 0.02 1.024x over
                                     // static-best, 0.05 1.039x, 0.1 1.028x, 0.25 1.001x)
  int64_t growth_reserve_tokens = 256; // KV kept per running request of the destination, so
                                       // that taking a request never preempts its own batch
  size_t max_migrations = 1024;      // per tick, a bound on work
  int cooldown_ticks = 10;           // the balancer actor pins a moved request this long
};

/// B_cap(M_free): the concurrency the KV allocator allows with the current headroom, i.e. the
/// running requests plus as many more of the average running context as still fit.
double kv_limited_concurrency(const gen_worker& w);

/// Eq. 5, with R~ the worker's rate relative to the deployment mean so that theta is
/// dimensionless. An idle worker scores 0.
double load_index(const gen_worker& w, double mean_rate);

struct migration {
  uint64_t request = 0;
  uint32_t from = 0;
  uint32_t to = 0;
  bool was_waiting = false;
};

/// Plans one tick of migrations; `workers` is updated to the state after them.
std::vector<migration> plan_migrations(std::vector<gen_worker>& workers,
                                       const balancer_params& params);

} // namespace loom
