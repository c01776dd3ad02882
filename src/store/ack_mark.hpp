#pragma once
// The acknowledged mark: RocksDB's sequence number after the last synced write, kept in a small
// file in the database directory and written after the WAL sync. RocksDB 7.8 tracks only closed
// WALs in its manifest, so a live WAL that is truncated or deleted opens silently without what
// it held; a database that opens below its mark has lost records someone was told were durable.
//
// The mark is written to the page cache on every synced write and itself synced only every
// `sync_every` marks and on flush: a second fdatasync per decision cost 67% of a synced write
// (bench_store). A process crash keeps every mark; a machine crash can only leave an older mark,
// which weakens the check but never refuses a sound database (the mark never passes the WAL).

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

namespace loom {

class ack_mark {
public:
  ack_mark() = default;
  ~ack_mark();
  ack_mark(const ack_mark&) = delete;
  ack_mark& operator=(const ack_mark&) = delete;

  /// The mark in database directory `dir`: 0 if it has none yet (a new database or one written
  /// before marks existed); storage_corrupted if the file is unreadable.
  static caf::expected<uint64_t> read(const std::string& dir);

  /// Opens (creating) the mark file of `dir` for writing.
  caf::error open(const std::string& dir);

  static constexpr unsigned sync_every = 64;

  /// Records `seq`, syncing the file when `sync` or every `sync_every` marks. Call only after
  /// the WAL holding `seq` was synced, so the mark never runs ahead of what is durable.
  caf::error write(uint64_t seq, bool sync = false);

private:
  int fd_ = -1;
  std::string path_;
  uint64_t written_ = 0;
  unsigned unsynced_ = 0;
};

} // namespace loom
