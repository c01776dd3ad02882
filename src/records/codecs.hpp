#pragma once
// The store owns record encoding: every record and event Loom persists, as loom.v1 protobuf
// bytes and back. Pure (no CAF, no RocksDB): actors build batches from these and the store
// writes them; readers (restart, `loom events`, tests) decode with the same functions.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types/common.hpp"
#include "types/fabric.hpp"
#include "types/scheduler.hpp"
#include "types/store.hpp"

namespace loom {

/// Version of the on-disk layout; a database made by a larger version is refused.
constexpr uint32_t schema_version = 1;

/// Event-log keys are big-endian sequence numbers, so RocksDB's order is the log order.
std::string event_key(uint64_t seq);
uint64_t event_seq(std::string_view key);

/// An entry of the event log (loom.v1.Event) at actor-clock time `clock_ns`, stored plus the
/// process's event clock offset: 0 in replay (simulated time, deterministic); `loom serve` sets
/// the steady clock's distance to the wall clock, so a live log carries wall-clock times.
std::string encode_event(int64_t clock_ns, const loom_event& event);
void set_event_clock_offset(int64_t ns);

struct stored_event {
  int64_t time_ns = 0;
  loom_event event;
};

/// Nothing if the bytes are not an Event of a kind this binary knows.
std::optional<stored_event> decode_event(std::string_view bytes);

/// A job as the store keeps it (loom.v1.Job, column family "jobs", key = job id).
struct job_record {
  rl_job job;
  job_state state = job_state::placed;
  std::string group; // while placed
  std::string reason;
  int64_t iterations_done = 0; // once ended: completed over every placement
};

std::string encode_job(const job_record& r);
std::optional<job_record> decode_job(std::string_view bytes);

/// A co-execution group (loom.v1.Group, column family "groups", key = group id).
struct group_record {
  std::string id;
  std::vector<std::string> jobs;
  std::vector<std::string> rollout_nodes;
  std::vector<std::string> training_nodes;
};

std::string encode_group(const group_record& r);
std::optional<group_record> decode_group(std::string_view bytes);

/// GPUs of one node a placement uses.
struct node_share {
  std::string node;
  int gpus = 0;
};

/// Where one job of a group runs (loom.v1.Placement, column family "placements", key = job).
struct placement_record {
  std::string job;
  std::string group;
  std::vector<node_share> rollout;
  std::vector<node_share> training;
};

std::string encode_placement(const placement_record& r);
std::optional<placement_record> decode_placement(std::string_view bytes);

/// Where a job stands in its group's round robin (loom.v1.JobProgress, column family
/// "progress", key = job id).
std::string encode_progress(const job_progress& p);
std::optional<job_progress> decode_progress(std::string_view bytes);

/// The scheduler's own record (loom.v1.SchedulerMeta, column family "meta", key "scheduler"):
/// its group counter and the nodes out of service, with why.
inline constexpr std::string_view scheduler_meta_key = "scheduler";
struct scheduler_meta {
  uint64_t next_group = 1;
  std::map<std::string, std::string> failed_nodes;
};
std::string encode_scheduler_meta(const scheduler_meta& m);
std::optional<scheduler_meta> decode_scheduler_meta(std::string_view bytes);

/// [ha]: the etcd revision a replica's store has applied (meta key "ha_revision", the
/// replica's own: never replicated), as the write that sets it and read back (0: none).
inline constexpr std::string_view ha_revision_key = "ha_revision";
record_write ha_revision_write(int64_t revision);
int64_t decode_ha_revision(std::string_view bytes);

/// A full-duplex circuit between duplex ports a < b of a device, and the plan holding it.
struct device_circuit {
  uint32_t a = 0;
  uint32_t b = 0;
  std::string owner;
  uint64_t version = 0; // of the owner's plan
  fabric_stage stage = fabric_stage::train_compute;
};

/// The committed circuits of one OCS device (loom.v1.CircuitPlan, column family
/// "circuit_plans", key = device id) and the cross-connects that realise them.
struct device_plan_record {
  std::string device;
  uint64_t version = 0;                          // the newest plan touching the device
  fabric_stage stage = fabric_stage::train_compute; // of that plan
  std::vector<device_circuit> circuits;
  std::vector<cross_connect> cross_connects;
};

std::string encode_device_plan(const device_plan_record& r);
std::optional<device_plan_record> decode_device_plan(std::string_view bytes);

/// An Opus job as registered (with its newest traces) and the topo_id its rails carry now
/// (loom.v1.OpusJobRecord, column family "opus_jobs", key = job).
struct opus_job_record {
  opus_job job;
  std::string topo;
};

std::string encode_opus_job(const opus_job_record& r);
std::optional<opus_job_record> decode_opus_job(std::string_view bytes);

} // namespace loom
