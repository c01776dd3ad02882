#pragma once
// What the store holds: one RocksDB column family per record kind, values encoded with the
// loom.v1 protobuf schema, and the plain structs that carry writes between actors.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace loom {

/// Version of the on-disk layout; a database made by a larger version is refused.
constexpr uint32_t schema_version = 1;

enum class record_kind : uint8_t { meta, jobs, groups, placements, circuit_plans, events };

constexpr record_kind all_record_kinds[] = {record_kind::meta,       record_kind::jobs,
                                            record_kind::groups,     record_kind::placements,
                                            record_kind::circuit_plans, record_kind::events};

/// The column family holding a record kind.
std::string_view column_family_name(record_kind kind);

std::string to_string(record_kind kind);

/// Event-log keys are big-endian sequence numbers, so RocksDB's order is the log order.
std::string event_key(uint64_t seq);
uint64_t event_seq(std::string_view key);

/// A serialized loom.v1.Event for the log.
std::string encode_event(int64_t time_ns, std::string kind, std::string subject,
                         std::string detail);

/// One put (or delete) of a keyed record.
struct record_write {
  record_kind kind = record_kind::jobs;
  std::string key;
  std::string value; // serialized loom.v1 message
  bool erase = false;
};

/// Writes applied atomically: all or none. Events are appended to the log in order and get the
/// next sequence numbers. `sync` makes the write durable (fsync'd WAL) before it is answered.
struct write_batch {
  std::vector<record_write> records;
  std::vector<std::string> events; // serialized loom.v1.Event
  bool sync = true;
};

struct stored_record {
  std::string key;
  std::string value;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, record_write& x) {
  return f(caf::meta::type_name("record_write"), x.kind, x.key, x.value, x.erase);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_batch& x) {
  return f(caf::meta::type_name("write_batch"), x.records, x.events, x.sync);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stored_record& x) {
  return f(caf::meta::type_name("stored_record"), x.key, x.value);
}

} // namespace loom
