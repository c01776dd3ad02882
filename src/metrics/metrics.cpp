#include "metrics/metrics.hpp"

namespace loom {

namespace {

using prometheus::Registry;

prometheus::Family<prometheus::Counter>& counters(Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Gauge>& gauges(Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

prometheus::Histogram& histogram(Registry& r, const char* name, const char* help,
                                 prometheus::Histogram::BucketBoundaries buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, std::move(buckets));
}

} // namespace

service_metrics::service_metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  actors_up_ = &gauges(r, "loom_actors_up", "Loom actors currently running, by actor kind");
  store_writes_ = &counters(r, "loom_store_writes_total",
                            "Records and events written to RocksDB, by record kind");
  store_batches_ = &counters(r, "loom_store_batches_total",
                             "Atomic write batches committed to RocksDB").Add({});
  store_errors_ = &counters(r, "loom_store_errors_total", "Store requests that failed").Add({});
  store_syncs_ = &counters(r, "loom_store_syncs_total",
                           "Synced WAL writes (one per group commit of queued batches)")
                   .Add({});
  store_writable_ = &gauges(r, "loom_store_writable",
                            "1 while the store takes writes; 0 in read-only mode (full or "
                            "failing disk): decisions are refused until it recovers")
                       .Add({});
  phase_overruns_ = &counters(r, "loom_phase_overruns_total",
                              "Phases past their job's worst case times the overrun factor");
  config_generation_ = &gauges(r, "loom_config_generation",
                               "Generation of the configuration in force (1 at start)").Add({});
  gateway_messages_ = &counters(r, "loom_gateway_messages_total",
                                "Gateway frames, by direction and body type");
  gateway_limited_ = &counters(r, "loom_gateway_limited_total",
                               "Frames or requests refused by a per-peer limit, by limit");
  refused_connections_ = &counters(r, "loom_gateway_refused_connections_total",
                                   "Connections refused for an unknown or missing CURVE key")
                            .Add({});
  workers_alive_ = &gauges(r, "loom_workers_alive",
                           "Registered worker sessions with recent heartbeats, by role");
  workers_dead_ = &counters(r, "loom_workers_dead_total",
                            "Workers declared dead after missing their heartbeats").Add({});
  grant_latency_ = &histogram(r, "loom_phase_grant_latency_seconds",
                              "PhaseAcquire to PhaseGrant, including waiting for the turn",
                              {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 1e-2, 0.1, 1, 10, 60, 600});
  jobs_ = &gauges(r, "loom_jobs",
                  "Jobs by state (placed, rejected, finished, failed, cancelled, drifted, moved)");
  groups_ = &gauges(r, "loom_groups", "Co-execution groups").Add({});
  iterations_ = &counters(r, "loom_iterations_total",
                          "RL iterations finished, each counted on both bases (planned: the job's "
                          "profiled solo time; measured: its worker's), by whether they met "
                          "their job's SLO (cold_start: the first after an admission)");
  decision_latency_ = &histogram(r, "loom_placement_decision_seconds",
                                 "WEAVE Algorithm 1 decision time",
                                 {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1});
  ocs_plans_ = &counters(r, "loom_fabric_plans_total",
                         "Fabric plan decisions by outcome (committed ones reprogrammed OCS)");
  ocs_device_up_ = &gauges(r, "loom_ocs_device_up",
                           "1 while the OCS device answers and is in sync, else 0");
  ocs_cross_connects_ = &gauges(r, "loom_ocs_cross_connects",
                                "Cross-connects on the device at its last read-back, by owner "
                                "(loom: on ports Loom manages; foreign: anyone else's)");
  ocs_device_errors_ = &counters(r, "loom_ocs_device_errors_total",
                                 "Times the device went down (did not answer, failed a read-back "
                                 "or a command)");
  ocs_device_last_error_ = &gauges(r, "loom_ocs_device_last_error_timestamp_seconds",
                                   "Unix time the device last went down (0: never)");
  gen_reconfigurations_ = &counters(r, "loom_gen_reconfigurations_total",
                                    "Parallelism switches of a generation deployment");
  gen_migrations_ = &counters(r, "loom_gen_migrations_total",
                              "Requests the balancer moved, by how their KV travelled");
  gen_solve_ = &histogram(r, "loom_gen_solve_seconds", "Generation planner solve time",
                          {1e-4, 1e-3, 1e-2, 0.05, 0.1, 1, 10});
  gen_switch_ = &histogram(r, "loom_gen_switch_seconds",
                           "A parallelism switch, from the drain until the new layout admitted",
                           {0.5, 1, 2, 5, 10, 30, 60});
  gen_forecast_error_ = &gauges(r, "loom_gen_forecast_error",
                                "Relative error of the last step's length-histogram forecast");
  gen_steps_ = &counters(r, "loom_gen_steps_total", "Generation steps finished");
  gen_engines_lost_ = &counters(r, "loom_gen_engines_lost_total",
                                "Engines lost: silent, gone, or not answering commands");
  gen_commands_ = &counters(r, "loom_gen_commands_total",
                            "Engine commands sent again or abandoned, by outcome");
  ha_leader_ = &gauges(r, "loom_ha_leader",
                       "1 while this replica leads ([ha]); 0 while it stands by").Add({});
  ha_leader_changes_ = &counters(r, "loom_ha_leader_changes_total",
                                 "Times this replica began or ended leading").Add({});
  ha_commit_ = &histogram(r, "loom_ha_commit_seconds",
                          "A group commit's fenced etcd transactions",
                          {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 1, 10});
  ha_applied_ = &gauges(r, "loom_ha_applied_revision",
                        "The etcd revision this replica's store has applied").Add({});
  ha_watch_lag_ = &gauges(r, "loom_ha_watch_lag_revisions",
                          "etcd revisions a standby's store is behind what its watch last saw")
                     .Add({});
  ha_etcd_errors_ = &counters(r, "loom_ha_etcd_errors_total",
                              "etcd calls that failed (unreachable, no quorum, refused)")
                       .Add({});
}

prometheus::Counter& service_metrics::gen_reconfigurations(const std::string& deployment) {
  return gen_reconfigurations_->Add({{"deployment", deployment}});
}

prometheus::Counter& service_metrics::gen_migrations(const std::string& deployment,
                                                    const std::string& mode) {
  return gen_migrations_->Add({{"deployment", deployment}, {"mode", mode}});
}

prometheus::Gauge& service_metrics::gen_forecast_error(const std::string& deployment) {
  return gen_forecast_error_->Add({{"deployment", deployment}});
}

prometheus::Counter& service_metrics::gen_steps(const std::string& deployment) {
  return gen_steps_->Add({{"deployment", deployment}});
}

prometheus::Counter& service_metrics::gen_engines_lost(const std::string& deployment) {
  return gen_engines_lost_->Add({{"deployment", deployment}});
}

prometheus::Counter& service_metrics::gen_commands(const std::string& deployment,
                                                  const std::string& outcome) {
  return gen_commands_->Add({{"deployment", deployment}, {"outcome", outcome}});
}

prometheus::Gauge& service_metrics::actors_up(const std::string& actor) {
  return actors_up_->Add({{"actor", actor}});
}

prometheus::Counter& service_metrics::store_writes(const std::string& kind) {
  return store_writes_->Add({{"kind", kind}});
}

prometheus::Counter& service_metrics::gateway_limited(const std::string& limit) {
  return gateway_limited_->Add({{"limit", limit}});
}

prometheus::Counter& service_metrics::gateway_messages(const std::string& direction,
                                                      const std::string& type) {
  return gateway_messages_->Add({{"direction", direction}, {"type", type}});
}

prometheus::Gauge& service_metrics::jobs(const std::string& state) {
  return jobs_->Add({{"state", state}});
}

prometheus::Counter& service_metrics::iterations(slo_basis basis, std::optional<bool> within_slo) {
  return iterations_->Add({{"basis", basis == slo_basis::planned ? "planned" : "measured"},
                           {"within_slo", !within_slo ? "cold_start"
                                          : *within_slo ? "true"
                                                        : "false"}});
}

prometheus::Counter& service_metrics::ocs_plans(const std::string& outcome) {
  return ocs_plans_->Add({{"outcome", outcome}});
}

prometheus::Gauge& service_metrics::ocs_device_up(const std::string& device) {
  return ocs_device_up_->Add({{"device", device}});
}

prometheus::Gauge& service_metrics::ocs_cross_connects(const std::string& device,
                                                       const std::string& owner) {
  return ocs_cross_connects_->Add({{"device", device}, {"owner", owner}});
}

prometheus::Counter& service_metrics::ocs_device_errors(const std::string& device) {
  return ocs_device_errors_->Add({{"device", device}});
}

prometheus::Gauge& service_metrics::ocs_device_last_error(const std::string& device) {
  return ocs_device_last_error_->Add({{"device", device}});
}

prometheus::Counter& service_metrics::phase_overruns(const std::string& phase) {
  return phase_overruns_->Add({{"phase", phase}});
}

prometheus::Gauge& service_metrics::workers_alive(const std::string& role) {
  return workers_alive_->Add({{"role", role}});
}

} // namespace loom
