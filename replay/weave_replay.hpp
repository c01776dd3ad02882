#pragma once
// `loom replay` for WEAVE: runs every policy a scenario lists over the same jobs, each in its
// own actor system on the virtual clock (the real cluster_scheduler, group executors and a
// RocksDB store under DIR/store/POLICY, against simulated frameworks), and reports them side
// by side. report.json depends only on the scenario and seed; wall-clock figures (decision
// latency, replay time) go to timings.json.

#include <string>

#include <caf/expected.hpp>

#include "replay/sim_frameworks.hpp"
#include "replay/weave_scenario.hpp"
#include "replay/weave_summary.hpp"

namespace loom::replay {

struct weave_replay_output {
  std::string report_json;
  std::string timings_json;
  std::string summary; // a table for humans
};

/// What one policy's run left behind.
struct policy_log {
  std::vector<cluster_record> cluster;
  std::vector<iteration_record> iterations;
  sim_ledger ledger;
  std::vector<double> decision_us;
  int64_t overruns = 0; // phases past the overrun factor (WEAVE §5.3)
};

/// The scenario's workload, as the report describes it.
ordered_json workload_json(const weave_scenario& sc);

/// A scheduler-run policy's report entry; its run ends at the last cluster record (`end`).
ordered_json policy_json(const weave_scenario& sc, policy_log& log, double start, double& end);

/// Runs the scenario; writes DIR/report.json, DIR/timings.json and DIR/store/.
caf::expected<weave_replay_output> run_weave_replay(const weave_scenario& scenario,
                                                    const std::string& out_dir);

} // namespace loom::replay
