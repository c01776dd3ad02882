#pragma once
// `loom replay` for the fabric (OrchestrRL §7.2, App. E, App. I; Opus §5.2): each section of a
// fabric scenario is computed from its inputs and reported beside the paper's figure:
//   collectives  traffic-aware vs uniform OCS-Agg allocation, timed by the flow model;
//   cost         Table 4 prices of fat-tree, 3:1 fat-tree, rail-optimised and RFabric;
//   opus         step time on demand and with provisioning vs native EPS, reconfigurations;
//   weight-sync  the two-level forest vs flat one-to-all vs WEAVE's one copy + broadcast;
//   rl           the real fabric_controller actor on the virtual clock with emulated OCS
//                devices and a RocksDB store (DIR/store/rl), over RL iterations.
// report.json depends only on the scenario and seed; wall-clock figures go to timings.json.

#include <string>

#include <caf/expected.hpp>

#include "replay/fabric_scenario.hpp"

namespace loom::replay {

struct fabric_replay_output {
  std::string report_json;
  std::string timings_json;
  std::string summary;
};

caf::expected<fabric_replay_output> run_fabric_replay(const fabric_scenario& scenario,
                                                      const std::string& out_dir);

} // namespace loom::replay
