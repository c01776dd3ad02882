#pragma once
// Loom's RocksDB database: one column family per record kind, WAL always on, atomic batches,
// and fsync'd writes for decisions acknowledged to anyone. No actors here: the store actor owns
// one instance; tests and benchmarks use it directly. Not thread-safe: one owner at a time.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "store/ack_mark.hpp"
#include "types/store.hpp"

namespace rocksdb {
class DB;
class WriteBatch;
class ColumnFamilyHandle;
} // namespace rocksdb

namespace loom {

/// How a read-write open treats a damaged write-ahead log.
enum class wal_recovery : uint8_t {
  /// Refuse to open (storage_corrupted) when the WAL has a damaged record before its end, a
  /// synced WAL is missing, or the database ends before its acknowledged mark (a live WAL was
  /// truncated or deleted): records acknowledged to someone would be dropped. A record torn by
  /// a crash mid-write was never acknowledged and is dropped.
  strict,
  /// Keep every record before the first damaged one and drop the rest (`serve --salvage`).
  salvage,
};

class database {
public:
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  /// Opens or creates the database at `path`. Fails with storage_locked (another process has
  /// it open), storage_corrupted, schema_too_new, storage_full, or storage_failure, each naming
  /// the path.
  static caf::expected<std::unique_ptr<database>>
  open(const std::string& path, wal_recovery recovery = wal_recovery::strict);

  /// Opens an existing database to read only, beside a writer that may have it open (e.g. a
  /// running serve): what it sees is what was durable when it opened. Writes fail. `cause`
  /// says why it is read-only (a store actor over it refuses writes with that reason).
  static caf::expected<std::unique_ptr<database>>
  open_read_only(const std::string& path, std::string cause = "opened read-only");

  /// Applies the batch atomically. Returns the sequence number of the last event in the log
  /// after the write (0 while the log is empty).
  caf::expected<uint64_t> write(const write_batch& batch);

  /// Group commit: the batches as one atomic write, with one WAL sync if any asks for it.
  /// Returns each batch's last event sequence, in order.
  caf::expected<std::vector<uint64_t>> write_all(const std::vector<const write_batch*>& batches);

  /// The value under `key`, or nothing if absent.
  caf::expected<std::optional<std::string>> get(record_kind kind, std::string_view key);

  /// All records of a kind whose key starts with `prefix`, in key order.
  caf::expected<std::vector<stored_record>> scan(record_kind kind, std::string_view prefix);

  /// Events with sequence >= `from`, at most `limit`, in log order.
  caf::expected<std::vector<stored_record>> read_events(uint64_t from, size_t limit);

  /// Deletes every record and event but the store's metadata: a standby that fell behind
  /// etcd's history reads the whole keyspace again into an empty store ([ha]).
  caf::error clear();

  /// Number of records of a kind (walks the column family: for start-up and tests).
  uint64_t count(record_kind kind);

  uint64_t last_event_seq() const { return last_event_seq_; }
  bool read_only() const { return read_only_; }
  /// This open created the database (it held no store metadata before).
  bool created() const { return created_; }
  const std::string& read_only_cause() const { return read_only_cause_; }
  /// A write or sync failed: this handle must not write or sync again (RocksDB's WAL writer
  /// asserts once it has seen an error), so the owner replaces it.
  bool broken() const { return broken_; }
  const std::string& path() const { return path_; }

  /// Makes everything written so far durable (syncs the WAL), e.g. before shutdown.
  caf::error flush();

  /// A read-write open checks, before each write, that its directory and LOCK file are still
  /// the ones it opened: a store removed or replaced under the process would take every later
  /// write into unlinked files, acknowledged and gone. Once they are not, the handle is lost:
  /// it takes no more writes (storage_read_only naming what changed) but still serves reads.
  caf::error check_identity();
  bool lost() const { return lost_; }

private:
  database() = default;
  rocksdb::ColumnFamilyHandle* handle(record_kind kind) const;
  /// A new database gets this binary's schema version; a newer one is refused.
  caf::error check_schema();
  /// Opens `path` with every column family it has, read-write or read-only.
  static caf::expected<std::unique_ptr<database>>
  open_families(const std::string& path, bool read_only, wal_recovery recovery);
  caf::error find_last_event();
  /// Refuses (strict) a database below its acknowledged mark; a salvage rewrites the mark.
  caf::error check_acked(uint64_t acked, wal_recovery recovery);
  /// After a WAL sync: the mark moves to everything written so far (`sync_mark`: durably now).
  caf::error mark_synced(bool sync_mark);
  /// Adds a batch to `wb`, its events numbered after `seq` (which it advances).
  caf::error stage(rocksdb::WriteBatch& wb, const write_batch& batch, uint64_t& seq);

  std::string path_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> all_handles_; // includes unknown families
  std::array<rocksdb::ColumnFamilyHandle*, enum_names<record_kind>::table.size()> handles_{};
  uint64_t last_event_seq_ = 0;
  bool read_only_ = false;
  std::string read_only_cause_;
  bool broken_ = false;
  bool lost_ = false;
  bool created_ = false;
  std::array<uint64_t, 4> identity_{}; // device and inode of the directory, then of LOCK
  ack_mark ack_;
};

} // namespace loom
