#include "fabric/safe_window.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace loom {

window_decision decide_commit(fabric_stage stage, const commit_window& w, double reconfig_s,
                              double margin_s) {
  window_decision d;
  auto granularity = [&]() -> bool {
    switch (stage) {
      case fabric_stage::train_compute:
      case fabric_stage::train_grad_sync:
        return w.kind == window_kind::stage_boundary || w.kind == window_kind::iteration_boundary;
      case fabric_stage::gen:
        return w.kind == window_kind::deployment_boundary;
      case fabric_stage::weight_sync:
        return w.kind == window_kind::before_broadcast || w.kind == window_kind::iteration_boundary;
    }
    return false;
  };
  if (!granularity()) {
    d.reason = fmt::format("{} does not reconfigure at a {} window", to_string(stage),
                           to_string(w.kind));
    return d;
  }
  if (stage == fabric_stage::weight_sync) {
    d.commit = true;
    d.exposed_s = std::max(0.0, reconfig_s - w.expected_s);
    return d;
  }
  if (w.expected_s < reconfig_s + margin_s) {
    d.reason = fmt::format("window {:.1f} ms < update {:.1f} ms + margin {:.1f} ms",
                           w.expected_s * 1e3, reconfig_s * 1e3, margin_s * 1e3);
    return d;
  }
  d.commit = true;
  return d;
}

} // namespace loom
