#pragma once
// Loom's own Prometheus metrics, one registry per process. Actors get a shared pointer at
// spawn; live mode exposes the registry on /metrics, replay keeps it private.

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace loom {

class service_metrics {
public:
  service_metrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  /// Actors running, by actor kind.
  prometheus::Gauge& actors_up(const std::string& actor);
  /// Records and events written, by record kind.
  prometheus::Counter& store_writes(const std::string& kind);
  prometheus::Counter& store_batches() { return *store_batches_; }
  prometheus::Counter& store_errors() { return *store_errors_; }
  /// Incremented each time a validated config is put in force.
  prometheus::Gauge& config_generation() { return *config_generation_; }

private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* actors_up_;
  prometheus::Family<prometheus::Counter>* store_writes_;
  prometheus::Counter* store_batches_;
  prometheus::Counter* store_errors_;
  prometheus::Gauge* config_generation_;
};

} // namespace loom
