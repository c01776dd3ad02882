#pragma once
// The offline-optimal baseline (WEAVE §6.5): for a set of jobs running at once, the cheapest
// way to host them over all groupings and placements (regrouping and reordering allowed),
// subject to the same memory, group-size and SLO constraints as Algorithm 1. Brute force: every
// subset of jobs that fits one group is costed over every partition of its members into
// shared rollout-node sets; a subset DP then picks the cheapest cover. Exponential, so only for
// small instances (the paper stops at 13 jobs).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/placement.hpp"

namespace loom::replay {

class offline_optimum {
public:
  /// Homogeneous pools: one rollout and one training node type. `policy` and `migrate_tails`
  /// as for placement_engine.
  offline_optimum(pool_node rollout_node, pool_node training_node, const weave_policy& policy,
                  bool migrate_tails);

  static constexpr size_t max_jobs = 14;

  /// $/hour of the optimal grouping of `jobs` (ids unique); nothing if more than max_jobs or
  /// some job cannot be hosted even alone.
  std::optional<double> cost_per_hour(const std::vector<rl_job>& jobs);

  /// The optimal grouping itself: each group's job ids.
  std::optional<std::vector<std::vector<std::string>>> grouping(const std::vector<rl_job>& jobs);

  /// $/hour of the cheapest single group hosting exactly these jobs; nothing if none is
  /// feasible.
  std::optional<double> group_cost_of(const std::vector<rl_job>& jobs);

private:
  struct cover {
    double cost = 0;
    std::vector<std::vector<const rl_job*>> groups;
  };
  /// The subset DP over every feasible group of `jobs`.
  std::optional<cover> best_cover(const std::vector<rl_job>& jobs);
  /// The cheapest single group hosting exactly these jobs; nothing if none is feasible.
  std::optional<double> group_cost(const std::vector<const rl_job*>& jobs);
  /// $/hour of the group with its members' rollouts in the bins of `bin`, nothing if a bin's
  /// node cannot hold its working sets; `first` gets each bin's first rollout node.
  std::optional<double> partition_cost(const std::vector<const rl_job*>& jobs,
                                       const std::vector<int>& bin, int training_nodes,
                                       std::vector<int>& first) const;
  /// Every member meets its SLO in the partition's round-robin schedule.
  bool partition_meets_slos(const std::vector<const rl_job*>& jobs, const std::vector<int>& bin,
                            const std::vector<int>& first, int group_training_gpus) const;

  pool_node rollout_node_;
  pool_node training_node_;
  weave_policy policy_;
  double tail_migration_cost_s_;
  std::map<std::string, std::optional<double>> memo_; // by the members' ids
};

} // namespace loom::replay
