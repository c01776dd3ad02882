#pragma once
// A cluster's keys in etcd, and the translation between the store's batches and etcd's
// transactions and watch events. Pure (no I/O): the replica commits what plan_commit makes
// and mirrors what mirror_writes makes of what it reads back.
//
// Under the prefix P:
//   P/leader           the election key: the leader's name, under its lease
//   P/replicas/NAME    each replica's status, under its own lease
//   P/r/KIND/KEY       one record of the store (its column family KIND)
//   P/e/SEQ            one event of the log, SEQ as 16 hex digits (etcd's order is the log's);
//                      the newest `event_retention` are kept (the local stores keep them all)

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types/ha.hpp"
#include "types/store.hpp"

namespace loom {

class keyspace {
public:
  explicit keyspace(std::string prefix) : prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }
  std::string leader() const { return prefix_ + "/leader"; }
  std::string replica(std::string_view name) const;
  std::string replicas() const { return prefix_ + "/replicas/"; }
  std::string record(record_kind kind, std::string_view key) const;
  std::string event(uint64_t seq) const;
  /// The whole keyspace, as a range's start (its end: range_end(all())).
  std::string all() const { return prefix_ + "/"; }

private:
  std::string prefix_;
};

/// The end of etcd's range of every key starting with `prefix` (its last byte below 0xff
/// incremented, what follows dropped): `etcdctl get --prefix`.
std::string range_end(std::string_view prefix);

/// What a transaction may hold: etcd's own limits (`--max-txn-ops`, `--max-request-bytes`).
struct txn_limits {
  uint32_t max_ops = 128;
  uint32_t max_bytes = 1'572'864;
};

/// A group commit as etcd transactions, each batch whole in one of them (a batch is one
/// decision: never split), consecutive batches packed together within the limits, each
/// transaction also deleting the events that fall out of the retention. `error` names a
/// batch too large for one transaction (nothing is committed then).
struct commit_plan {
  std::vector<std::vector<etcd_op>> txns;
  std::string error;
};

/// `first_seq`: the sequence number the first batch's first event takes.
commit_plan plan_commit(const keyspace& keys, const std::vector<const write_batch*>& batches,
                        uint64_t first_seq, const txn_limits& limits, uint64_t event_retention);

/// What a mirror makes of keys it read or was told of: the store's writes (events at their
/// own sequence numbers; an event etcd dropped for retention stays in the local log), what
/// became of the election key, and keys of a kind this binary does not know.
struct mirror_update {
  std::vector<write_batch> batches; // each a contiguous run of events, applied as one write
  std::optional<bool> leader;       // true: a replica leads now; false: none does
  std::string error;                // a key this binary cannot mirror (a newer schema)
};

mirror_update mirror_writes(const keyspace& keys, const std::vector<etcd_event>& changes);

/// A replica's status as its key's value (loom.v1.ReplicaStatus), and back.
std::string encode_replica(const replica_status& s);
std::optional<replica_status> decode_replica(std::string_view bytes);

} // namespace loom
