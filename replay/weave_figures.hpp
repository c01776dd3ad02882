#pragma once
// The data behind a WEAVE replay's figures (report.html draws them from report.json): the
// cluster's cost and GPUs over time, each job's worst steady-state slowdown against its SLO
// (WEAVE §4.2), and what the busiest group's members ran over a window of its meta-iterations
// (WEAVE §5). Pure and bounded: the same records give the same JSON.

#include <vector>

#include "replay/sim_frameworks.hpp"
#include "replay/weave_summary.hpp"

namespace loom::replay {

/// `timeline` (hours since `start`, $/h, rollout and training GPUs, one point per record) and
/// `jobs` (id, worst steady slowdown, SLO), columnar.
ordered_json weave_series(const std::vector<cluster_record>& cluster,
                          const std::vector<iteration_record>& iterations, double start);

/// At most this many activities go into a group's Gantt.
constexpr size_t gantt_max_activities = 60;

/// The group with the most members: its activities from the moment its second member starts
/// (seconds since then), `gantt_max_activities` at most; null when no activity was recorded.
ordered_json group_gantt(const std::vector<activity_span>& activities);

} // namespace loom::replay
