#pragma once
// The WEAVE baselines that are computed rather than run through the scheduler: veRL-style
// co-location (WEAVE §6.1) and the offline optimum over the active job sets of weave's run.

#include <vector>

#include "replay/weave_scenario.hpp"
#include "replay/weave_summary.hpp"

namespace loom::replay {

/// Every phase of a job on its own training-pool nodes, rollout slowed by the HBM bandwidth
/// ratio (decode is memory-bound), a warm engine swap on both phase switches, weights
/// resharded locally instead of synced across the link. At most the training pool's GPUs are
/// in use; a job arriving to too few free ones is rejected.
ordered_json run_colocated(const weave_scenario& sc, length_draws& draws, double start);

/// The offline optimum over the same active job sets as weave's run (its cluster records).
ordered_json run_optimal(const weave_scenario& sc, const std::vector<cluster_record>& weave_run,
                         double start, double end);

/// A lower bound on that optimum at any scale (cover_bound): the LP relaxation over the same
/// active job sets.
ordered_json run_bound(const weave_scenario& sc, const std::vector<cluster_record>& weave_run,
                       double start, double end);

} // namespace loom::replay
