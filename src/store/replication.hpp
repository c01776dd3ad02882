#pragma once
// Where a replicated store commits before it writes its own RocksDB ([ha]): the etcd cluster
// its replicas share (ha/replica implements this; the store sees only the interface, so the
// actors layer knows nothing of etcd). Without [ha] the store has none and RocksDB alone is
// the durable copy, as always.

#include <cstdint>
#include <vector>

#include <caf/expected.hpp>

#include "types/store.hpp"

namespace loom {

class replication {
public:
  virtual ~replication() = default;

  /// Commits the batches (their events numbered from `first_seq` on) to the replicated log,
  /// each batch whole, fenced by this replica's leadership; returns the log's revision after
  /// them. Fails with not_leader (deposed: nothing more may be committed by this replica) or
  /// storage_read_only (etcd could not commit: no quorum, unreachable; nothing acknowledged).
  virtual caf::expected<int64_t> commit(const std::vector<const write_batch*>& batches,
                                        uint64_t first_seq) = 0;

  /// A commit reached etcd but this replica's store could not follow it: its copy is behind,
  /// so it must stop leading (a standby reads the log again before it may lead).
  virtual void diverged(const caf::error& why) = 0;
};

} // namespace loom
