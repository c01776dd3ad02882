#pragma once
// The store actor: one RocksDB database behind the store_actor protocol. Group commit: a write
// is queued, and the writes queued by the time the actor turns to them are applied as one
// atomic RocksDB write with one WAL sync (the drain message it sends itself comes after every
// message already in its mailbox); every writer is answered after that sync. Reads commit the
// queue first, so a reader sees every write sent before its read.
//
// Read-only mode, as a database handles a failing disk: when a write or sync fails (a full
// disk, an I/O error), nothing of it was acknowledged; the store answers that write and every
// later one with storage_read_only, serves reads from a read-only open of the same directory,
// and tries a read-write open after `reopen_interval`, then at doubling intervals up to
// `max_reopen_interval` (one log line each), until one succeeds (space freed), without a
// restart. It starts in this mode on a database that a full disk keeps from opening.
//
// Lost mode: the store directory was removed or replaced under the service (checked before
// every write and every `watch_interval`). Every write is refused with why, reads come from
// the handle it has, and nothing reopens the path: an alarm for the operator, not a disk to
// wait for.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "metrics/metrics.hpp"
#include "protocol/actors.hpp"
#include "store/database.hpp"
#include "store/replication.hpp"

namespace loom {

struct store_state {
  static inline const char* name = "store";
  std::shared_ptr<database> db;
  std::shared_ptr<service_metrics> metrics;
  std::shared_ptr<replication> replica; // [ha]: etcd, committed to before the database
  std::vector<write_batch> queued;
  std::vector<caf::typed_response_promise<uint64_t>> waiting; // one per queued batch
  std::string path;
  std::string read_only_reason; // empty while writable
  std::chrono::milliseconds reopen_delay{1000}; // doubles per failed reopen, up to the max

  store_state() = default;
  store_state(const store_state&) = delete;
  store_state& operator=(const store_state&) = delete;
  /// CAF destroys the state when the actor exits, before anyone monitoring it hears so: the
  /// flush makes every write durable by then, whatever ended the actor.
  ~store_state();
};

constexpr auto reopen_interval = std::chrono::milliseconds{1000};
constexpr auto max_reopen_interval = std::chrono::milliseconds{30'000};
constexpr auto watch_interval = std::chrono::milliseconds{1000};

/// The store actor over an opened database; it closes the database (flushing the WAL) when it
/// terminates. A database opened read-only starts it in read-only mode, for the database's
/// read_only_cause().
store_actor::behavior_type store(store_actor::stateful_pointer<store_state> self,
                                 std::shared_ptr<database> db,
                                 std::shared_ptr<service_metrics> metrics);

/// The same over a replica ([ha]): every write is committed there first, and the database is
/// the replica's local copy at the revision that commit returned (written unsynced: etcd holds
/// it durably, and a copy that lost its tail reads it back from etcd).
store_actor::behavior_type replicated_store(store_actor::stateful_pointer<store_state> self,
                                            std::shared_ptr<database> db,
                                            std::shared_ptr<service_metrics> metrics,
                                            std::shared_ptr<replication> replica);

} // namespace loom
