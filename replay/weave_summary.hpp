#pragma once
// What a WEAVE replay reports for one policy, computed from what its run recorded: the
// cluster's cost and GPUs over time (cluster records) and every job's iterations against its
// SLO (WEAVE §4.2, §6). Pure: the same records give the same JSON.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "types/scheduler.hpp"

namespace loom::replay {

using ordered_json = nlohmann::ordered_json;

/// Time-weighted value of a step function of (time, value) over [start, end].
struct step_stats {
  double average = 0;
  double peak = 0;
  double integral = 0; // value x seconds
};

step_stats integrate(const std::vector<std::pair<double, double>>& steps, double start,
                     double end);

double seconds_of(int64_t ns);

/// The common report fields from a cost/GPU timeline and per-iteration records; `jobs` is
/// how many jobs the workload has.
ordered_json summarize(const std::vector<cluster_record>& cluster,
                       const std::vector<iteration_record>& iterations,
                       double rollout_busy_gpu_s, double training_busy_gpu_s, size_t jobs,
                       double start, double end);

/// The table `loom replay` prints for people, one row per policy.
std::string summary_table(const ordered_json& policies, const ordered_json& timings);

} // namespace loom::replay
