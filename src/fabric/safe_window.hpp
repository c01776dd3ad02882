#pragma once
// Safe windows and reconfiguration granularity (RFabric §5.3, §5.2, OrchestrRL §2.2), pure.
// A plan commits only inside a collective-free window expected to cover the OCS update plus a
// margin; otherwise the current plan stays for the period. Where a stage may reconfigure at
// all depends on its slack: Train at stage boundaries inside an iteration (compute to
// grad-sync, attention to MoE), Gen only at deployment boundaries (its overlap slack is too
// small for in-step changes), Weight Sync on demand right before the broadcast, whose slack
// hides the update (what it does not hide is reported as exposed).

#include <cstdint>
#include <string>
#include <string_view>

#include "fabric/demand.hpp"
#include "types/fabric.hpp"

namespace loom {

struct window_decision {
  bool commit = false;
  double exposed_s = 0; // update time the window does not cover (weight sync only)
  std::string reason;   // why not now
};

/// Whether a plan for `stage` may commit in `window` given the slowest device's update time.
window_decision decide_commit(fabric_stage stage, const commit_window& window, double reconfig_s,
                              double margin_s);

} // namespace loom
