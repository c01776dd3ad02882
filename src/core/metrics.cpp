#include "core/metrics.hpp"

namespace loom {

service_metrics::service_metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  actors_up_ = &prometheus::BuildGauge()
                  .Name("loom_actors_up")
                  .Help("Loom actors currently running, by actor kind")
                  .Register(*registry_);
  store_writes_ = &prometheus::BuildCounter()
                     .Name("loom_store_writes_total")
                     .Help("Records and events written to RocksDB, by record kind")
                     .Register(*registry_);
  store_batches_ = &prometheus::BuildCounter()
                      .Name("loom_store_batches_total")
                      .Help("Atomic write batches committed to RocksDB")
                      .Register(*registry_)
                      .Add({});
  store_errors_ = &prometheus::BuildCounter()
                     .Name("loom_store_errors_total")
                     .Help("Store requests that failed")
                     .Register(*registry_)
                     .Add({});
  config_generation_ = &prometheus::BuildGauge()
                          .Name("loom_config_generation")
                          .Help("Generation of the configuration in force (1 at start)")
                          .Register(*registry_)
                          .Add({});
}

prometheus::Gauge& service_metrics::actors_up(const std::string& actor) {
  return actors_up_->Add({{"actor", actor}});
}

prometheus::Counter& service_metrics::store_writes(const std::string& kind) {
  return store_writes_->Add({{"kind", kind}});
}

} // namespace loom
