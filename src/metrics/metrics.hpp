#pragma once
// Loom's own Prometheus metrics, one registry per process. Actors get a shared pointer at
// spawn; live mode exposes the registry on /metrics, replay keeps it private.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
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
  /// Synced WAL writes: one per group-committed run of batches.
  prometheus::Counter& store_syncs() { return *store_syncs_; }
  /// 1 while the store takes writes, 0 in read-only mode (a full or failing disk).
  prometheus::Gauge& store_writable() { return *store_writable_; }
  /// Incremented each time a validated config is put in force.
  prometheus::Gauge& config_generation() { return *config_generation_; }
  /// Gateway frames by direction ("in" | "out") and body type.
  prometheus::Counter& gateway_messages(const std::string& direction, const std::string& type);
  /// Frames or requests refused by a per-peer limit: "rate" (a key's frames per second),
  /// "sessions" (a key's live sessions), "acquires" (waiting PhaseAcquires).
  prometheus::Counter& gateway_limited(const std::string& limit);
  /// Connections whose CURVE key the ZAP handler refused.
  prometheus::Counter& refused_connections() { return *refused_connections_; }
  /// Live worker sessions, by role.
  prometheus::Gauge& workers_alive(const std::string& role);
  /// Workers declared dead after missing their heartbeats.
  prometheus::Counter& workers_dead() { return *workers_dead_; }
  /// PhaseAcquire to PhaseGrant, seconds (WEAVE §5.1 run permits).
  prometheus::Histogram& grant_latency() { return *grant_latency_; }

  /// Jobs by state and co-execution groups, as the scheduler last reported them.
  prometheus::Gauge& jobs(const std::string& state);
  prometheus::Gauge& groups() { return *groups_; }
  /// Which solo time an iteration's SLO is judged against: the job's profiled worst case
  /// (what admission planned with) or the one its worker measured for the same work.
  enum class slo_basis : uint8_t { planned, measured };
  /// Iterations finished, by basis and by whether they were within their job's SLO (WEAVE's
  /// attainment, as the replay report counts it); the first after each admission is a cold
  /// start, counted apart, as the report leaves it out.
  prometheus::Counter& iterations(slo_basis basis, std::optional<bool> within_slo);
  /// Phases that ran past their job's worst case times the overrun factor (WEAVE §5.3).
  prometheus::Counter& phase_overruns(const std::string& phase);
  /// Placement decision time (WEAVE Alg. 1), seconds.
  prometheus::Histogram& decision_latency() { return *decision_latency_; }
  /// Fabric plan outcomes (committed, deferred, kept, unchanged).
  prometheus::Counter& ocs_plans(const std::string& outcome);
  // Per OCS device (RFabric App. H health): answering and in sync, the cross-connects its last
  // read-back found (owner "loom": on ports Loom manages; "foreign": anyone else's), and its
  // failures with the wall-clock time of the last one.
  prometheus::Gauge& ocs_device_up(const std::string& device);
  prometheus::Gauge& ocs_cross_connects(const std::string& device, const std::string& owner);
  prometheus::Counter& ocs_device_errors(const std::string& device);
  prometheus::Gauge& ocs_device_last_error(const std::string& device);

  // OrchestrRL §4 live, by deployment.
  /// Parallelism switches the planner made (each a drain, reshard and admit of the engines).
  prometheus::Counter& gen_reconfigurations(const std::string& deployment);
  /// Requests the balancer moved, by how their state travelled (kv | recompute | queued).
  prometheus::Counter& gen_migrations(const std::string& deployment, const std::string& mode);
  /// Planner solve time (Eq. 1-4), seconds.
  prometheus::Histogram& gen_solve_seconds() { return *gen_solve_; }
  /// A switch's duration, drain to the new layout admitting (§6.2.2's accounting), seconds.
  prometheus::Histogram& gen_switch_seconds() { return *gen_switch_; }
  /// The last finished step's forecast error (histogram L1 over the batch).
  prometheus::Gauge& gen_forecast_error(const std::string& deployment);
  prometheus::Counter& gen_steps(const std::string& deployment);
  /// Engines lost (silent, gone, or not answering commands).
  prometheus::Counter& gen_engines_lost(const std::string& deployment);
  /// Commands sent again or abandoned for want of an answer, by outcome.
  prometheus::Counter& gen_commands(const std::string& deployment, const std::string& outcome);

  // [ha]: this replica's part in the control plane on etcd.
  /// 1 while it leads (serves the gateway, commits to etcd), 0 while it stands by.
  prometheus::Gauge& ha_leader() { return *ha_leader_; }
  /// Times this replica began or ended leading.
  prometheus::Counter& ha_leader_changes() { return *ha_leader_changes_; }
  /// One group commit's etcd transactions, seconds.
  prometheus::Histogram& ha_commit_seconds() { return *ha_commit_; }
  /// The etcd revision its store has applied, and how far behind etcd's it is (a standby).
  prometheus::Gauge& ha_applied_revision() { return *ha_applied_; }
  prometheus::Gauge& ha_watch_lag() { return *ha_watch_lag_; }
  /// etcd calls that failed (an endpoint unreachable, no quorum, a refused commit).
  prometheus::Counter& ha_etcd_errors() { return *ha_etcd_errors_; }

private:
  prometheus::Gauge* ha_leader_;
  prometheus::Counter* ha_leader_changes_;
  prometheus::Histogram* ha_commit_;
  prometheus::Gauge* ha_applied_;
  prometheus::Gauge* ha_watch_lag_;
  prometheus::Counter* ha_etcd_errors_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Gauge* groups_;
  prometheus::Family<prometheus::Counter>* iterations_;
  prometheus::Histogram* decision_latency_;
  prometheus::Family<prometheus::Counter>* ocs_plans_;
  prometheus::Family<prometheus::Gauge>* ocs_device_up_;
  prometheus::Family<prometheus::Gauge>* ocs_cross_connects_;
  prometheus::Family<prometheus::Counter>* ocs_device_errors_;
  prometheus::Family<prometheus::Gauge>* ocs_device_last_error_;
  prometheus::Family<prometheus::Counter>* gateway_messages_;
  prometheus::Counter* refused_connections_;
  prometheus::Family<prometheus::Counter>* gateway_limited_;
  prometheus::Family<prometheus::Gauge>* workers_alive_;
  prometheus::Counter* workers_dead_;
  prometheus::Histogram* grant_latency_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* actors_up_;
  prometheus::Family<prometheus::Counter>* store_writes_;
  prometheus::Counter* store_batches_;
  prometheus::Counter* store_errors_;
  prometheus::Counter* store_syncs_;
  prometheus::Gauge* store_writable_;
  prometheus::Family<prometheus::Counter>* phase_overruns_;
  prometheus::Gauge* config_generation_;
  prometheus::Family<prometheus::Counter>* gen_reconfigurations_;
  prometheus::Family<prometheus::Counter>* gen_migrations_;
  prometheus::Histogram* gen_solve_;
  prometheus::Histogram* gen_switch_;
  prometheus::Family<prometheus::Gauge>* gen_forecast_error_;
  prometheus::Family<prometheus::Counter>* gen_steps_;
  prometheus::Family<prometheus::Counter>* gen_engines_lost_;
  prometheus::Family<prometheus::Counter>* gen_commands_;
};

} // namespace loom
