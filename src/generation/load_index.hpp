#pragma once
// Reactive balancing (OrchestrRL §4.2, Eq. 5, Alg. 1 event 2), pure: rank generation workers by
// LoadIndex_w = (|Q_run| + |Q_wait|) / B_cap(M_free) x 1 / R~_w and move requests from the most
// to the least congested while the gap exceeds theta, waiting queue first and shortest context
// first, only where the destination keeps its stable batch.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "types/generation.hpp"

namespace loom {

struct balancer_params {
  double theta = 0.05;               // stop once max - min LoadIndex <= theta (§4.2 gives no
                                     // value; replay of gen-qwen14b-25k: 0.02 1.024x over
                                     // static-best, 0.05 1.039x, 0.1 1.028x, 0.25 1.001x)
  int64_t growth_reserve_tokens = 256; // KV kept per running request of the destination, so
                                       // that taking a request never preempts its own batch
  size_t max_migrations = 1024;      // per tick, a bound on work
  int cooldown_ticks = 10;           // ticks a moved request stays pinned (reactive_balancer)
};

/// A worker's observed pace across ticks: RFC 6298's smoothed mean and mean deviation (the
/// estimator TCP trusts for round-trip times). A tick's rate carries transients, a recompute's
/// prefill above all, that do not persist; moves judged on them feed on themselves (on
/// gen-qwen14b-25k with every move recomputed, a worker's rate fell below 1 token/s in ticks
/// spent recomputing what it was sent, requests moved 7.6 times each, and balancer-only lost
/// 24% to static-best).
class pace_estimate {
public:
  /// One tick's rate; an idle worker's 0 says nothing of its pace and is skipped.
  void observe(double rate_tps);
  double mean_tps() const { return mean_; }
  double spread_tps() const { return spread_; }
  /// The fastest it has run: the pace it offers a request once idle (it ran its last, fewest
  /// requests at it).
  double peak_tps() const { return peak_; }

private:
  double mean_ = 0;
  double spread_ = 0;
  double peak_ = 0;
  bool seen_ = false;
};

/// B_cap(M_free): the concurrency the KV allocator allows with the current headroom, i.e. the
/// running requests plus as many more of the average running context as still fit.
double kv_limited_concurrency(const gen_worker& w);

/// Eq. 5, with R~ the worker's rate relative to the deployment mean so that theta is
/// dimensionless. An idle worker scores 0.
double load_index(const gen_worker& w, double mean_rate);

/// Plans one tick of migrations; `workers` is updated to the state after them.
std::vector<migration> plan_migrations(std::vector<gen_worker>& workers,
                                       const balancer_params& params);

/// The balancer across ticks: plan_migrations with a cooldown. A request it moved stays pinned
/// for `cooldown_ticks` ticks: a move shifts the loads it was computed from, and without the
/// pause requests oscillate between workers.
class reactive_balancer {
public:
  explicit reactive_balancer(balancer_params params) : params_(params) {}

  /// One monitoring tick over the workers' loads: the migrations to make.
  std::vector<migration> tick(std::vector<gen_worker> workers);

  uint64_t ticks() const { return ticks_; }
  uint64_t migrations() const { return migrations_; }
  /// Requests pinned now (moved within the cooldown).
  size_t pinned() const { return moved_at_.size(); }

private:
  balancer_params params_;
  uint64_t ticks_ = 0;
  uint64_t migrations_ = 0;
  std::unordered_map<uint64_t, uint64_t> moved_at_; // request -> tick of its last move
};

} // namespace loom
