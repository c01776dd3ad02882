#pragma once
// The offline-optimal baseline (WEAVE §6.5): for a set of jobs running at once, the cheapest
// way to host them over all groupings and placements (regrouping and reordering allowed),
// subject to the same memory, group-size and SLO constraints as Algorithm 1. Brute force: every
// subset of jobs that fits one group is costed over every partition of its members into
// shared rollout-node sets; a subset DP then picks the cheapest cover. Exponential, so only for
// small instances (the paper stops at 13 jobs).

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/placement.hpp"

namespace loom::replay {

/// What bounds a group's cheapest hosting from below: its widest members' nodes per pool and
/// its members' host-memory footprints.
struct group_extent {
  int rollout_nodes = 0;
  int training_nodes = 0;
  double rollout_memory_gb = 0;
  double training_memory_gb = 0;

  group_extent merged(const group_extent& o) const {
    return {std::max(rollout_nodes, o.rollout_nodes), std::max(training_nodes, o.training_nodes),
            rollout_memory_gb + o.rollout_memory_gb, training_memory_gb + o.training_memory_gb};
  }
};

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

  /// The same for members sorted by id (the memo's key), without copying them.
  std::optional<double> group_cost(const std::vector<const rl_job*>& members);

  /// A job's extent; a group's is its members' merged.
  group_extent extent_of(const rl_job& job) const;

  /// A floor under group_cost of a group of this extent and of any group holding its members:
  /// the widest member's nodes in each pool, and at least as many rollout nodes as their
  /// working sets fill (each node's share stays under its memory); infinite where their
  /// training states overfill a node. Cheap, for pruning a search over groups.
  double group_cost_floor(const group_extent& e) const;

  int max_group_size() const { return policy_.max_group_size; }

  /// A member's phases as Algorithm 1 plans them on `nodes` (shared: in a group of several).
  planned_phases member_plan(const rl_job& job, std::vector<int> nodes, int group_training_gpus,
                             bool shared) const;

  /// The longest iteration a lower bound may show `job` and leave it feasible: its SLO with
  /// a margin wider than the simulation's rounding, so a necessary test never refuses what
  /// the simulation would accept.
  static double slo_limit_s(const rl_job& job) { return job.slo * job.solo_s() * (1 + 1e-9); }

  /// The training pool a group holding `job` needs at least: its whole nodes' GPUs.
  int training_gpus_for(const rl_job& job) const;

  /// Groups costed so far (each partition of its members tried).
  size_t groups_costed() const { return memo_.size(); }

private:
  struct cover {
    double cost = 0;
    std::vector<std::vector<const rl_job*>> groups;
  };
  /// The subset DP over every feasible group of `jobs`.
  std::optional<cover> best_cover(const std::vector<rl_job>& jobs);
  /// $/hour of the group with its members' rollouts in the bins of `bin`, nothing if a bin's
  /// node cannot hold its working sets; `first` gets each bin's first rollout node.
  std::optional<double> partition_cost(const std::vector<const rl_job*>& jobs,
                                       const std::vector<int>& bin, int training_nodes,
                                       std::vector<int>& first) const;
  /// A necessary condition for any partition to meet the members' SLOs.
  bool trainings_fit_slos(const std::vector<const rl_job*>& jobs, int group_training_gpus) const;
  /// A necessary condition for the partition to meet the members' SLOs (planned `members`).
  bool rollouts_fit_slos(const std::vector<const rl_job*>& jobs, const std::vector<int>& bin,
                         const std::vector<planned_phases>& members) const;
  /// Every member meets its SLO in the partition's round-robin schedule.
  bool partition_meets_slos(const std::vector<const rl_job*>& jobs, const std::vector<int>& bin,
                            const std::vector<int>& first, int group_training_gpus) const;

  pool_node rollout_node_;
  pool_node training_node_;
  weave_policy policy_;
  double tail_migration_cost_s_;
  std::unordered_map<std::string, std::optional<double>> memo_; // by the members' ids
};

} // namespace loom::replay
