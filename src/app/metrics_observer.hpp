#pragma once
// Live mode's observer of the WEAVE actors: iterations against their SLOs and placement
// decision times into Prometheus, and jobs by state and groups polled from the scheduler.

#include <memory>

#include "core/actors.hpp"
#include "core/metrics.hpp"

namespace loom {

struct metrics_observer_state {
  static inline const char* name = "metrics_observer";
  std::shared_ptr<service_metrics> metrics;
};

observer_actor::behavior_type
metrics_observer(observer_actor::stateful_pointer<metrics_observer_state> self,
                 std::shared_ptr<service_metrics> metrics);

/// Asks the scheduler for jobs and groups every `period` and sets the gauges.
void poll_scheduler_metrics(caf::actor_system& sys, cluster_scheduler_actor scheduler,
                            std::shared_ptr<service_metrics> metrics,
                            std::chrono::milliseconds period);

} // namespace loom
