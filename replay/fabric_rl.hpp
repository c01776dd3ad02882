#pragma once
// The fabric scenario's `rl` section: the real fabric_controller actor on the virtual clock,
// with emulated OCS devices and a RocksDB store (DIR/store/rl), taking one RL job's stages in
// turn (train fwd/bwd, grad-sync, weight-sync, gen: RFabric §5.2) for some iterations.

#include <string>

#include <caf/expected.hpp>
#include <nlohmann/json.hpp>

#include "replay/fabric_scenario.hpp"

namespace loom::replay {

/// A time, or null when it is infinite (traffic with no circuit path).
nlohmann::json time_json(double s);

/// The section's report entry; `summary` gets its line.
caf::expected<nlohmann::json> rl_json(const fabric_scenario& sc, const rl_section& rl,
                                      const std::string& dir, std::string& summary);

} // namespace loom::replay
