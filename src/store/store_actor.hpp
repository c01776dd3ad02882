#pragma once

#include <memory>

#include "core/actors.hpp"
#include "core/metrics.hpp"
#include "store/database.hpp"

namespace loom {

struct store_state {
  static inline const char* name = "store";
  std::shared_ptr<database> db;
  std::shared_ptr<service_metrics> metrics;

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
