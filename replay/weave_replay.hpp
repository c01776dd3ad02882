#pragma once
// `loom replay` for WEAVE: runs every policy a scenario lists over the same jobs, each in its
// own actor system on the virtual clock (the real cluster_scheduler, group executors and a
// RocksDB store under DIR/store/POLICY, against simulated frameworks), and reports them side
// by side. report.json depends only on the scenario and seed; wall-clock figures (decision
// latency, replay time) go to timings.json.

#include <string>

#include <caf/expected.hpp>

#include "replay/weave_scenario.hpp"

namespace loom::replay {

struct weave_replay_output {
  std::string report_json;
  std::string timings_json;
  std::string summary; // a table for humans
};

/// Runs the scenario; writes DIR/report.json, DIR/timings.json and DIR/store/.
caf::expected<weave_replay_output> run_weave_replay(const weave_scenario& scenario,
                                                    const std::string& out_dir);

} // namespace loom::replay
