#pragma once
// The standard Prometheus process metrics (process_cpu_seconds_total, resident memory, open
// fds, start time), read from /proc on every scrape; prometheus-cpp does not provide them.

#include <prometheus/collectable.h>

namespace loom {

class process_collector : public prometheus::Collectable {
public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

} // namespace loom
