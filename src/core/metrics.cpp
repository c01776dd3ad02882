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
  gateway_messages_ = &prometheus::BuildCounter()
                         .Name("loom_gateway_messages_total")
                         .Help("Gateway frames, by direction and body type")
                         .Register(*registry_);
  refused_connections_ = &prometheus::BuildCounter()
                            .Name("loom_gateway_refused_connections_total")
                            .Help("Connections refused for an unknown or missing CURVE key")
                            .Register(*registry_)
                            .Add({});
  workers_alive_ = &prometheus::BuildGauge()
                      .Name("loom_workers_alive")
                      .Help("Registered worker sessions with recent heartbeats, by role")
                      .Register(*registry_);
  workers_dead_ = &prometheus::BuildCounter()
                     .Name("loom_workers_dead_total")
                     .Help("Workers declared dead after missing their heartbeats")
                     .Register(*registry_)
                     .Add({});
  grant_latency_ = &prometheus::BuildHistogram()
                      .Name("loom_phase_grant_latency_seconds")
                      .Help("PhaseAcquire to PhaseGrant, including waiting for the turn")
                      .Register(*registry_)
                      .Add({}, prometheus::Histogram::BucketBoundaries{
                                 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 1e-2, 0.1, 1, 10, 60, 600});
  jobs_ = &prometheus::BuildGauge()
             .Name("loom_jobs")
             .Help("Jobs by state (placed, finished, failed, rejected, cancelled)")
             .Register(*registry_);
  groups_ = &prometheus::BuildGauge()
               .Name("loom_groups")
               .Help("Co-execution groups")
               .Register(*registry_)
               .Add({});
  iterations_ = &prometheus::BuildCounter()
                   .Name("loom_iterations_total")
                   .Help("RL iterations finished, by whether they met their job's SLO")
                   .Register(*registry_);
  decision_latency_ = &prometheus::BuildHistogram()
                         .Name("loom_placement_decision_seconds")
                         .Help("WEAVE Algorithm 1 decision time")
                         .Register(*registry_)
                         .Add({}, prometheus::Histogram::BucketBoundaries{
                                    1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1});
  ocs_plans_ = &prometheus::BuildCounter()
                  .Name("loom_fabric_plans_total")
                  .Help("Fabric plan decisions by outcome (committed ones reprogrammed OCS)")
                  .Register(*registry_);
}

prometheus::Gauge& service_metrics::actors_up(const std::string& actor) {
  return actors_up_->Add({{"actor", actor}});
}

prometheus::Counter& service_metrics::store_writes(const std::string& kind) {
  return store_writes_->Add({{"kind", kind}});
}

prometheus::Counter& service_metrics::gateway_messages(const std::string& direction,
                                                      const std::string& type) {
  return gateway_messages_->Add({{"direction", direction}, {"type", type}});
}

prometheus::Gauge& service_metrics::jobs(const std::string& state) {
  return jobs_->Add({{"state", state}});
}

prometheus::Counter& service_metrics::iterations(bool within_slo) {
  return iterations_->Add({{"within_slo", within_slo ? "true" : "false"}});
}

prometheus::Counter& service_metrics::ocs_plans(const std::string& outcome) {
  return ocs_plans_->Add({{"outcome", outcome}});
}

prometheus::Gauge& service_metrics::workers_alive(const std::string& role) {
  return workers_alive_->Add({{"role", role}});
}

} // namespace loom
