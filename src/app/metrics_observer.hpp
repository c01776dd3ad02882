#pragma once
// Live mode's observers: of the WEAVE actors (iterations against their SLOs, placement
// decision times, and jobs by state and groups polled from the scheduler) and of the
// generation deployments (reconfigurations, migrations, solve times, forecast errors).

#include <memory>

#include "metrics/metrics.hpp"
#include "protocol/actors.hpp"

namespace loom {

struct metrics_observer_state {
  static inline const char* name = "metrics_observer";
  std::shared_ptr<service_metrics> metrics;
};

observer_actor::behavior_type
metrics_observer(observer_actor::stateful_pointer<metrics_observer_state> self,
                 std::shared_ptr<service_metrics> metrics);

/// Live mode's observer of the generation deployments: their decisions into Prometheus.
struct gen_metrics_state {
  static inline const char* name = "gen_metrics";
  std::shared_ptr<service_metrics> metrics;
};

gen_observer_actor::behavior_type
gen_metrics(gen_observer_actor::stateful_pointer<gen_metrics_state> self,
            std::shared_ptr<service_metrics> metrics);

/// Asks the scheduler for jobs and groups every `period` and sets the gauges.
void poll_scheduler_metrics(caf::actor_system& sys, cluster_scheduler_actor scheduler,
                            std::shared_ptr<service_metrics> metrics,
                            std::chrono::milliseconds period);

} // namespace loom
