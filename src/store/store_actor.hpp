#pragma once
// The store actor: one RocksDB database behind the store_actor protocol. Group commit: a write
// is queued, and the writes queued by the time the actor turns to them are applied as one
// atomic RocksDB write with one WAL sync (the drain message it sends itself comes after every
// message already in its mailbox); every writer is answered after that sync. Reads commit the
// queue first, so a reader sees every write sent before its read.

#include <memory>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "core/actors.hpp"
#include "core/metrics.hpp"
#include "store/database.hpp"

namespace loom {

struct store_state {
  static inline const char* name = "store";
  std::shared_ptr<database> db;
  std::shared_ptr<service_metrics> metrics;
  std::vector<write_batch> queued;
  std::vector<caf::typed_response_promise<uint64_t>> waiting; // one per queued batch

  store_state() = default;
  store_state(const store_state&) = delete;
  store_state& operator=(const store_state&) = delete;
  /// CAF destroys the state when the actor exits, before anyone monitoring it hears so: the
  /// flush makes every write durable by then, whatever ended the actor.
  ~store_state();
};

/// The store actor over an opened database; it closes the database (flushing the WAL) when it
/// terminates.
store_actor::behavior_type store(store_actor::stateful_pointer<store_state> self,
                                 std::shared_ptr<database> db,
                                 std::shared_ptr<service_metrics> metrics);

} // namespace loom
