#pragma once
// High availability on etcd (Raft): several `serve` replicas of one cluster share an etcd
// cluster; one leads by an etcd lease and its election key, and every decision it acknowledges
// is committed to etcd first, in a transaction fenced by that leadership. Plain data: the
// [ha] settings and the etcd v3 primitives the keyspace core and the client exchange.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types/names.hpp"

namespace loom {

/// TLS towards etcd (its client port's https://): a CA to verify it, and a client certificate
/// where etcd asks for one (`--client-cert-auth`). Empty: the system's defaults, no client cert.
struct ha_tls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

/// The [ha] table. Without it a service runs alone on its RocksDB, as always.
struct ha_config {
  std::vector<std::string> endpoints; // etcd client URLs: http(s)://host:port
  std::string name;                   // this replica, unique among the cluster's replicas
  std::string advertise;              // the gateway endpoint clients reach it at
  std::string prefix;                 // every key Loom writes is under it
  uint32_t lease_ttl_s = 5;           // a dead leader's replicas take over within it
  uint32_t request_timeout_ms = 2000; // one etcd call on one endpoint
  uint32_t max_txn_ops = 128;         // etcd's --max-txn-ops: a transaction's ops at most
  uint32_t max_request_bytes = 1'572'864; // etcd's --max-request-bytes
  uint64_t event_retention = 100'000; // events etcd keeps (the local stores keep them all)
  uint64_t history_revisions = 10'000; // etcd's history kept behind the newest revision
  ha_tls tls;
};

/// One key-value as etcd holds it.
struct etcd_kv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

/// A change a watch reports.
struct etcd_event {
  bool erased = false; // a DELETE (the key's value is gone)
  etcd_kv kv;
};

/// One write of a transaction: a put (with `lease` if non-zero), or the deletion of the keys in
/// [key, range_end) (of `key` alone if range_end is empty).
struct etcd_op {
  enum class kind : uint8_t { put, erase } what = kind::put;
  std::string key;
  std::string value;
  std::string range_end;
  int64_t lease = 0;
};

/// A transaction's condition: the key's create revision equals `create_revision` (0: the key
/// does not exist). Loom needs no other: leadership is the election key's create revision.
struct etcd_compare {
  std::string key;
  int64_t create_revision = 0;
};

/// A replica's part in its cluster's control plane.
enum class ha_role : uint8_t {
  standby, // mirrors etcd into its store and waits to lead; binds no gateway
  leader,  // serves the gateway; commits every decision to etcd first
};

template <>
struct enum_names<ha_role> {
  static constexpr std::array<std::pair<ha_role, std::string_view>, 2> table{{
    {ha_role::standby, "standby"},
    {ha_role::leader, "leader"},
  }};
};

/// What a replica publishes of itself under the keyspace's replicas/ (with its lease: a dead
/// replica's entry goes with it), for `loom ha` and the other replicas.
struct replica_status {
  std::string name;
  ha_role role = ha_role::standby;
  std::string advertise;
  std::string metrics;        // host:port of its metrics endpoint
  int64_t applied_revision = 0; // how far its store has the log
  int64_t pid = 0;
};

} // namespace loom
