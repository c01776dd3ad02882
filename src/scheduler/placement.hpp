#pragma once
// Inter-group scheduling, WEAVE §4.2 Algorithm 1, pure: place an arriving job into the
// co-execution group (J_G, R_G, T_G, Phi_G) that minimises the marginal provisioning cost,
// subject to per-node host-memory residency and every member's SLO (checked by simulating the
// round-robin meta-iteration). Saturated groups are pruned; candidates are direct packing onto
// a member's rollout nodes or the least loaded ones, rollout scaling onto new rollout nodes with
// the group's training nodes, and an isolated new group. A job joining a group runs training
// at the group's training-pool size (its DP degree is matched up or down, footnote 2).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/meta_iteration.hpp"
#include "scheduler/phase_costs.hpp"
#include "types/cluster.hpp"
#include "types/policy.hpp"
#include "types/scheduler.hpp"

namespace loom {

struct pool_node {
  std::string id;
  int gpus = 0;
  double memory_gb = 0;
  double cost_per_hour = 0; // all its GPUs
};

struct co_execution_group;

/// Host memory a job's training state pins on each node of a training pool of
/// `group_training_gpus`: its sharded state spreads over the pool's nodes, so a pool smaller
/// than the job asked for holds proportionally more per node (a larger one is not counted
/// as less, to stay conservative).
double training_memory_per_node(const rl_job& job, int group_training_gpus);

/// A job as a group's schedule plans it, its training DP matched to the group's pool
/// (footnote 2). Shared with other jobs (`shared`: its switches on the group's GPUs, as the
/// executor pays them), each phase starts with a warm load of its state (WEAVE §5.1) and a
/// rollout may pause to consolidate its long tail (§4.3).
planned_phases plan_member(const rl_job& job, std::vector<int> rollout_nodes,
                           int group_training_gpus, const std::optional<phase_switches>& shared,
                           double tail_migration_cost_s);

/// Rollout time per meta-iteration pinned to one node of a group.
double rollout_load(const co_execution_group& g, int node);

struct placement_decision {
  placement_kind kind = placement_kind::rejected;
  uint64_t group = 0;                  // the group joined (for a new group: its future id)
  std::vector<int> rollout_nodes;      // the job's rollout nodes (rollout-pool indices)
  std::vector<int> new_rollout_nodes;  // nodes provisioned for this decision
  std::vector<int> new_training_nodes;
  double delta_cost_per_hour = 0;      // Cost(G') - Cost(G)
  std::string reason;                  // why a job was rejected
};

struct co_execution_group {
  uint64_t id = 0;
  std::vector<group_member> members; // J_G with Phi_G (their rollout nodes), in round-robin order
  std::vector<planned_phases> plan;  // the same members as the schedule sees them
  std::vector<int> rollout_nodes;    // R_G
  std::vector<int> training_nodes;   // T_G
  int training_gpus = 0;
  bool is_saturated = false;         // T_load >= T_cycle, kept current
};

class placement_engine {
public:
  /// `policy`: group size, SLO bound and the warm-start model members are planned with;
  /// `migrate_tails`: whether a shared rollout pauses to migrate its tail (§4.3).
  placement_engine(std::vector<pool_node> rollout_pool, std::vector<pool_node> training_pool,
                   const weave_policy& policy = {}, bool migrate_tails = false);

  /// Algorithm 1 for one arriving job; changes nothing.
  placement_decision place(const rl_job& job) const;

  /// Applies a decision returned by place() for the same job.
  void commit(const rl_job& job, const placement_decision& decision);

  /// After a restart: a group as it was decided, with its members in turn order. Empty if it
  /// was taken as it is, else why not (a node unknown or used twice).
  std::string restore(uint64_t id, const std::vector<int>& rollout_nodes,
                      const std::vector<int>& training_nodes,
                      const std::vector<group_member>& members);
  /// Group ids are never reused: after a restart they go on from the stored counter.
  void set_next_group_id(uint64_t id) { next_group_ = std::max(next_group_, id); }

  /// A job finished, failed or was cancelled: it leaves its group; an emptied group releases
  /// its nodes. False if the job is unknown.
  bool remove(const std::string& job_id);

  /// The cluster's $/h if the group's members all left and were placed again by Algorithm 1
  /// in turn order (consolidation), or nothing if one would be rejected. Tried in place and
  /// undone: the engine is left exactly as it was (a copy of thousands of nodes costs more
  /// than the trial).
  std::optional<double> cost_after_regrouping(uint64_t id);

  /// A node that failed is offered to no placement until it is back; a group keeps the ones
  /// it holds until their jobs leave. False if there is no such node.
  bool set_failed(bool rollout_pool, int node, bool failed);
  /// The jobs pinned to a node: on it for rollout, or in the group that trains on it.
  std::vector<std::string> jobs_on(bool rollout_pool, int node) const;

  const std::map<uint64_t, co_execution_group>& groups() const { return groups_; }
  /// Kept as nodes are provisioned and released, not summed per call.
  double cost_per_hour() const { return cost_per_hour_; }
  /// One group's own provisioning cost (its rollout and training nodes); 0 if there is none.
  double group_cost_per_hour(uint64_t id) const;
  int gpus_in_use(bool rollout) const { return rollout ? rollout_gpus_used_ : training_gpus_used_; }
  size_t jobs() const { return job_group_.size(); }
  uint64_t next_group_id() const { return next_group_; }
  int max_group_size() const { return policy_.max_group_size; }

  const std::vector<pool_node>& rollout_pool() const { return rollout_pool_; }
  const std::vector<pool_node>& training_pool() const { return training_pool_; }
  /// Unprovisioned nodes, in pool order, adding up to at least `gpus`; empty if too few.
  std::vector<int> free_rollout_nodes(int gpus) const;
  std::vector<int> free_training_nodes(int gpus) const;
  /// Host memory the group's jobs pin on one of its rollout nodes.
  double rollout_memory_used(const co_execution_group& g, int node) const;
  /// Host memory the group's jobs pin on each of its training nodes.
  double training_memory_used(const co_execution_group& g) const;
  /// The group has a place for one more member and its training nodes hold the job's state
  /// (Alg. 1 lines 4 and 8, the training pool never growing for an arrival: footnote 2).
  bool has_room(const co_execution_group& g, const rl_job& job) const;
  /// One of the group's rollout nodes holds the job's rollout working set (Alg. 1 line 8).
  bool rollout_fits(const co_execution_group& g, const rl_job& job, int node) const;
  /// The job in `g` on `nodes` meets every member's SLO, its own included (Alg. 1 line 10).
  bool meets_slos(const co_execution_group& g, const rl_job& job,
                  const std::vector<int>& nodes) const;
  /// The decision that gives the job an isolated group on fresh nodes (Alg. 1 lines 15-17),
  /// or a rejection saying why that is impossible.
  placement_decision isolated(const rl_job& job) const;
  /// Rollout nodes one job needs.
  size_t rollout_nodes_needed(const rl_job& job) const;
  /// The job as a shared group's schedule sees it (plan_member).
  planned_phases member_for(const rl_job& job, const std::vector<int>& rollout_nodes,
                          int group_training_gpus) const;

private:
  std::vector<int> free_nodes(const std::vector<pool_node>& pool, const std::set<int>& free,
                              int gpus) const;
  /// Provisions or releases a node, keeping the cost and GPU counts.
  void set_rollout_used(int node, bool used);
  void set_training_used(int node, bool used);
  /// Why a job can never be placed on this cluster, or empty.
  std::string never_fits(const rl_job& job) const;
  /// Keeps `open_` current after the group changed (or went).
  void update_open(uint64_t id);
  /// GENERATEPLACEMENTS for a job needing `nodes` rollout nodes: each member's rollout node
  /// set of that size and the group's least loaded nodes.
  std::set<std::vector<int>> packings(const co_execution_group& g, size_t nodes) const;

  std::vector<pool_node> rollout_pool_;
  std::vector<pool_node> training_pool_;
  std::vector<bool> rollout_used_;
  std::vector<bool> training_used_;
  std::vector<bool> rollout_failed_;
  std::vector<bool> training_failed_;
  // The unused nodes in index order, so that a fresh group's nodes are found without scanning
  // the provisioned ones (Alg. 1 lines 15-17 take the first free nodes).
  std::set<int> rollout_free_;
  std::set<int> training_free_;
  weave_policy policy_;
  double tail_migration_cost_s_;
  uint64_t next_group_ = 1;
  double cost_per_hour_ = 0;
  int rollout_gpus_used_ = 0;
  int training_gpus_used_ = 0;
  std::map<uint64_t, co_execution_group> groups_;
  // Groups Algorithm 1 may add a member to (not full, not saturated), in id order: the only
  // ones an arrival's search visits (lines 4 and 8 prune the rest).
  std::set<uint64_t> open_;
  // The pools' totals, for jobs no node set can ever hold.
  int rollout_gpus_total_ = 0;
  int training_gpus_total_ = 0;
  double rollout_memory_max_ = 0;
  double training_memory_max_ = 0;
  std::map<std::string, uint64_t> job_group_;
  // The group with a candidate added, as meets_slos checks it: kept between calls so that its
  // members' node lists are copied into storage already there, not allocated per candidate.
  mutable std::vector<planned_phases> candidate_plan_;
};

} // namespace loom
