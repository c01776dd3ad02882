#pragma once
// What the store holds and the plain structs that carry writes between actors (no CAF): one
// RocksDB column family per record kind, and an append-only log of typed events. Values are
// encoded with the loom.v1 protobuf schema by store/codecs.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types/names.hpp"

namespace loom {

/// A record kind; its name is its column family's.
enum class record_kind : uint8_t {
  meta,
  jobs,
  groups,
  placements,
  circuit_plans,
  events,
  progress, // where each placed job stands in its group's round robin
  gen_deployments, // each generation deployment's controller: layout, step, commands
  gen_steps,       // each step's batch and the requests finished so far
  gen_forecasts,   // each deployment's forecaster history
  opus_jobs,       // each Opus job on photonic rails: layout, rails, traces, topo_id now
};

template <>
struct enum_names<record_kind> {
  static constexpr std::array<std::pair<record_kind, std::string_view>, 11> table{{
    {record_kind::meta, "meta"},
    {record_kind::jobs, "jobs"},
    {record_kind::groups, "groups"},
    {record_kind::placements, "placements"},
    {record_kind::circuit_plans, "circuit_plans"},
    {record_kind::events, "events"},
    {record_kind::progress, "progress"},
    {record_kind::gen_deployments, "gen_deployments"},
    {record_kind::gen_steps, "gen_steps"},
    {record_kind::gen_forecasts, "gen_forecasts"},
    {record_kind::opus_jobs, "opus_jobs"},
  }};
};

/// What an entry of the event log records (loom.v1.EventKind on disk).
enum class event_kind : uint8_t {
  job_placed,
  job_rejected,
  job_finished,
  job_failed,
  job_cancelled,
  job_drifted,
  fabric_committed,
  fabric_plan_deferred,
  fabric_plan_kept,
  fabric_commit_failed,
  ocs_port_masked,
  opus_registered,
  opus_reconfigured,
  opus_fallback,
  gen_reconfigured,
  gen_step_started,
  gen_step_done,
  gen_engine_lost,
  gen_command_abandoned,
  ocs_device_down,    // a switch stopped answering (or its agent went away)
  ocs_device_resumed, // ... and is back, read back and repaired
  node_failed,        // a cluster node is out of service: its jobs fail, placements avoid it
  node_recovered,     // ... and is back in the pools
  opus_profiled,      // an Opus job's phase table, learned from its shims' traces
  job_moved,          // consolidation: left its group to be placed where it costs less
  gen_step_aborted,   // a generation step ended unfinished (its timeout, or an operator)
  job_profiled,       // its profiling pass ended: it leaves that group to be placed
  opus_ended,         // an Opus job is done: its circuits left its rails, its ports are free
};

template <>
struct enum_names<event_kind> {
  static constexpr std::array<std::pair<event_kind, std::string_view>, 28> table{{
    {event_kind::job_placed, "job_placed"},
    {event_kind::job_rejected, "job_rejected"},
    {event_kind::job_finished, "job_finished"},
    {event_kind::job_failed, "job_failed"},
    {event_kind::job_cancelled, "job_cancelled"},
    {event_kind::job_drifted, "job_drifted"},
    {event_kind::fabric_committed, "fabric_committed"},
    {event_kind::fabric_plan_deferred, "fabric_plan_deferred"},
    {event_kind::fabric_plan_kept, "fabric_plan_kept"},
    {event_kind::fabric_commit_failed, "fabric_commit_failed"},
    {event_kind::ocs_port_masked, "ocs_port_masked"},
    {event_kind::opus_registered, "opus_registered"},
    {event_kind::opus_reconfigured, "opus_reconfigured"},
    {event_kind::opus_fallback, "opus_fallback"},
    {event_kind::gen_reconfigured, "gen_reconfigured"},
    {event_kind::gen_step_started, "gen_step_started"},
    {event_kind::gen_step_done, "gen_step_done"},
    {event_kind::gen_engine_lost, "gen_engine_lost"},
    {event_kind::gen_command_abandoned, "gen_command_abandoned"},
    {event_kind::ocs_device_down, "ocs_device_down"},
    {event_kind::ocs_device_resumed, "ocs_device_resumed"},
    {event_kind::node_failed, "node_failed"},
    {event_kind::node_recovered, "node_recovered"},
    {event_kind::opus_profiled, "opus_profiled"},
    {event_kind::job_moved, "job_moved"},
    {event_kind::gen_step_aborted, "gen_step_aborted"},
    {event_kind::job_profiled, "job_profiled"},
    {event_kind::opus_ended, "opus_ended"},
  }};
};

/// One decision for the event log: what, about whom, and the details as `key=value` pairs
/// (the same text the structured log line carries).
struct loom_event {
  event_kind kind = event_kind::job_placed;
  std::string subject;
  std::string detail;
};

/// One put (or delete) of a keyed record.
struct record_write {
  record_kind kind = record_kind::jobs;
  std::string key;
  std::string value; // serialized loom.v1 message
  bool erase = false;
  std::string erase_to = {}; // with erase: every key in [key, erase_to), not `key` alone

  /// A range deletion that names no key: no write at all (RocksDB's recovery would not count
  /// its sequence number, and etcd has nothing to delete).
  bool empty_range() const { return erase && !erase_to.empty() && erase_to <= key; }
};

/// Writes applied atomically: all or none. Events are appended to the log in order and get the
/// next sequence numbers. `sync` makes the write durable (fsync'd WAL) before it is answered.
struct write_batch {
  std::vector<record_write> records;
  std::vector<std::string> events; // serialized loom.v1.Event
  bool sync = true;
  /// Non-zero: the events take the sequence numbers from this one on, where the leader's log
  /// numbered them (a standby mirroring it, [ha]); zero: the next ones of this store's log.
  uint64_t first_event_seq = 0;
};

struct stored_record {
  std::string key;
  std::string value;
};

} // namespace loom
