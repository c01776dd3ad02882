#pragma once
// Intra-group round-robin schedule (WEAVE §4.3): in every meta-iteration each job runs its
// rollout once on its pinned rollout nodes, then its training once on the group's training
// nodes, then syncs; every node serves phases first-come in the group's round-robin order (the
// run permits of §5.1). Pure.

#include <vector>

namespace loom {

/// One member's phases as the schedule plans them: its pinned nodes and phase durations.
struct planned_phases {
  std::vector<int> rollout_nodes; // indices of the group's rollout nodes it is pinned to
  double rollout_s = 0;
  double training_s = 0; // at the group's training-pool size
  double sync_s = 0;
  double solo_s() const { return rollout_s + training_s + sync_s; }
};

/// T_cycle: the longest member's solo iteration (WEAVE §4.2).
double cycle_time(const std::vector<planned_phases>& members);

/// T_load: the busiest node's work per meta-iteration, all training on every training node,
/// each rollout on its own nodes (WEAVE §4.2).
double load_time(const std::vector<planned_phases>& members);

/// The group is saturated when T_load >= T_cycle: no slack left for more work.
bool saturated(const std::vector<planned_phases>& members);

/// Steady-state iteration time of each member under the round-robin schedule, by list
/// scheduling enough meta-iterations to reach the periodic regime.
std::vector<double> meta_iteration_times(const std::vector<planned_phases>& members);

/// The longest single iteration of each member once the last one joins a group the others
/// have been running (it enters at a round boundary, after them, as the group executor
/// admits it): the transition and the new periodic regime, every iteration, as a job's SLO
/// counts them. For the joiner its first iteration (the start-up) is left out.
std::vector<double> longest_iterations_after_join(const std::vector<planned_phases>& members);

/// An upper bound on any single iteration of each member whatever its phases realize at or
/// below their worst case. The worst-case schedule alone does not bound one iteration: the
/// previous one may end early (its phases ran short) while the phases ahead of the next one
/// run long. With a fixed turn order on every resource, when member j's iteration ends only
/// these can still stand before its next one, each taking at most its worst case from then:
/// the others' syncs, the rollout, training and sync of the members after j (their previous
/// round), and the rollout and training of the members before j (this round).
std::vector<double> iteration_bounds(const std::vector<planned_phases>& members);

} // namespace loom
