#include "store/database.hpp"

#include <algorithm>
#include <filesystem>

#include <sys/stat.h>

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "loom.pb.h"
#include "protocol/error.hpp"
#include "records/codecs.hpp"
#include "store/rocks_log.hpp"

namespace loom {

namespace {

caf::error to_error(const rocksdb::Status& st, const std::string& path, std::string_view what) {
  auto text = st.ToString();
  // A read-only mount or directory fails the LOCK file first: not another process.
  if (st.IsIOError()
      && (text.find("Read-only file system") != std::string::npos
          || text.find("Permission denied") != std::string::npos))
    return make_error(errc::storage_read_only,
                      fmt::format("database {} cannot be written ({})", path, text));
  if (st.IsIOError() && text.find("lock") != std::string::npos)
    return make_error(errc::storage_locked,
                      fmt::format("database {} is in use by another process ({})", path, text));
  if (st.IsCorruption())
    return make_error(errc::storage_corrupted,
                      fmt::format("database {} is corrupted: {}", path, text));
  if (st.IsNoSpace())
    return make_error(errc::storage_full, fmt::format("{} {}: {}", what, path, text));
  return make_error(errc::storage_failure, fmt::format("{} {}: {}", what, path, text));
}

} // namespace

database::~database() {
  if (!db_)
    return;

  for (auto* h : all_handles_)
    db_->DestroyColumnFamilyHandle(h);
  db_->Close();
}

namespace {

rocksdb::DBOptions db_options(wal_recovery recovery = wal_recovery::strict) {
  rocksdb::DBOptions opts;
  opts.create_if_missing = true;
  opts.create_missing_column_families = true;
  opts.paranoid_checks = true;
  opts.max_background_jobs = 2;
  opts.info_log = rocks_log();
  // A synced WAL that goes missing (deleted, or lost by the file system) fails the open
  // instead of silently dropping what it held.
  opts.track_and_verify_wals_in_manifest = true;
  opts.wal_recovery_mode = recovery == wal_recovery::strict
                             ? rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords
                             : rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  return opts;
}

/// RocksDB requires every existing column family to be opened, including ones a newer schema
/// added: Loom's own, and whatever else is there (the schema check then refuses the database).
/// Unless `only_existing` (read-only), the families this binary knows are added to be created.
caf::expected<std::vector<std::string>> column_families(const std::string& path,
                                                        bool only_existing) {
  std::vector<std::string> names;
  auto listed = rocksdb::DB::ListColumnFamilies(db_options(), path, &names);
  if (!listed.ok() && (listed.IsCorruption() || only_existing))
    return to_error(listed, path, "cannot open");
  for (auto kind : all_values<record_kind>()) {
    if (only_existing)
      break; // a read-only open cannot create them
    std::string name{to_string(kind)};
    if (std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  if (std::find(names.begin(), names.end(), rocksdb::kDefaultColumnFamilyName) == names.end())
    names.push_back(rocksdb::kDefaultColumnFamilyName);
  return names;
}

/// Device and inode of the directory at `path` and of its LOCK file; zeros for what is gone.
std::array<uint64_t, 4> identity_of(const std::string& path) {
  std::array<uint64_t, 4> id{};
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    id[0] = st.st_dev, id[1] = st.st_ino;
  if (::stat((path + "/LOCK").c_str(), &st) == 0)
    id[2] = st.st_dev, id[3] = st.st_ino;
  return id;
}

} // namespace

caf::expected<std::unique_ptr<database>> database::open(const std::string& path,
                                                        wal_recovery recovery) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    return make_error(errc::storage_failure,
                      fmt::format("cannot create database directory {}: {}", path, ec.message()));
  return open_families(path, false, recovery);
}

caf::expected<std::unique_ptr<database>> database::open_read_only(const std::string& path,
                                                                  std::string cause) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path{path} / "CURRENT", ec))
    return make_error(errc::storage_failure, fmt::format("{} is not a Loom store", path));
  auto db = open_families(path, true, wal_recovery::salvage);
  if (db)
    (*db)->read_only_cause_ = std::move(cause);
  return db;
}

caf::expected<std::unique_ptr<database>>
database::open_families(const std::string& path, bool read_only, wal_recovery recovery) {
  auto names = column_families(path, read_only);
  if (!names)
    return names.error();
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (auto& n : *names)
    descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions{});
  std::unique_ptr<database> self{new database};
  self->path_ = path;
  self->read_only_ = read_only;
  // Read before the open: a writer beside a read-only open only moves the mark past what the
  // open then reads.
  auto acked = ack_mark::read(path);
  if (!acked)
    return acked.error();
  rocksdb::DB* raw = nullptr;
  auto opts = db_options(recovery);
  auto st = read_only
              ? rocksdb::DB::OpenForReadOnly(opts, path, descriptors, &self->all_handles_, &raw)
              : rocksdb::DB::Open(opts, path, descriptors, &self->all_handles_, &raw);
  if (!st.ok()) {
    auto err = to_error(st, path, "cannot open database");
    if (code_of(err) != errc::storage_corrupted || recovery == wal_recovery::salvage)
      return err;
    return make_error(errc::storage_corrupted,
                      fmt::format("{}; it was not opened, so nothing was dropped. `loom serve "
                                  "--salvage` keeps every record before the damage and drops "
                                  "the rest (back the directory up first)",
                                  message_of(err)));
  }
  self->db_.reset(raw);
  if (!read_only)
    self->identity_ = identity_of(path);
  for (size_t i = 0; i < names->size(); ++i)
    for (auto kind : all_values<record_kind>())
      if ((*names)[i] == to_string(kind))
        self->handles_[size_t(kind)] = self->all_handles_[i];
  for (auto kind : {record_kind::meta, record_kind::events})
    if (!self->handle(kind))
      return make_error(errc::storage_failure, fmt::format("{} is not a Loom store", path));
  if (auto err = self->check_acked(*acked, recovery))
    return err;
  if (auto err = self->check_schema())
    return err;
  if (auto err = self->find_last_event())
    return err;
  return self;
}

caf::error database::check_schema() {
  // A new database gets our version; an older one is readable as is.
  auto meta = get(record_kind::meta, "store");
  if (!meta)
    return meta.error();
  if (!*meta && read_only_)
    return make_error(errc::storage_failure, fmt::format("{} is not a Loom store", path_));
  if (!*meta) {
    v1::StoreMeta fresh;
    fresh.set_schema_version(schema_version);
    fresh.set_created_by("loom " LOOM_VERSION);
    write_batch init;
    init.records.push_back({record_kind::meta, "store", fresh.SerializeAsString(), false});
    auto res = write(init);
    created_ = bool(res);
    return res ? caf::error{} : res.error();
  }
  v1::StoreMeta stored;
  if (!stored.ParseFromString(**meta))
    return make_error(errc::storage_corrupted,
                      fmt::format("database {} is corrupted: unreadable store metadata", path_));
  if (stored.schema_version() > schema_version)
    return make_error(errc::schema_too_new,
                      fmt::format("database {} was written with schema v{} by {}; this loom "
                                  "reads schema v{} and older",
                                  path_, stored.schema_version(), stored.created_by(),
                                  schema_version));
  return {};
}

caf::error database::check_acked(uint64_t acked, wal_recovery recovery) {
  auto latest = db_->GetLatestSequenceNumber();
  bool salvage = !read_only_ && recovery == wal_recovery::salvage;
  if (latest < acked && !salvage)
    return make_error(errc::storage_corrupted,
                      fmt::format("database {} ends at write {} but writes up to {} were "
                                  "acknowledged: a write-ahead log was truncated or deleted. It "
                                  "was not opened, so nothing more was dropped. `loom serve "
                                  "--salvage` accepts the loss and goes on from write {}",
                                  path_, latest, acked, latest));
  if (read_only_)
    return {};
  if (auto err = ack_.open(path_))
    return err;
  return salvage ? ack_.write(latest, true) : caf::error{};
}

caf::error database::mark_synced(bool sync_mark) {
  if (auto err = ack_.write(db_->GetLatestSequenceNumber(), sync_mark)) {
    broken_ = true;
    return err;
  }
  return {};
}

caf::error database::find_last_event() {
  std::unique_ptr<rocksdb::Iterator> it{
    db_->NewIterator(rocksdb::ReadOptions{}, handle(record_kind::events))};
  it->SeekToLast();
  if (it->Valid())
    last_event_seq_ = event_seq(std::string_view{it->key().data(), it->key().size()});
  if (!it->status().ok())
    return to_error(it->status(), path_, "cannot read event log of");
  return {};
}

rocksdb::ColumnFamilyHandle* database::handle(record_kind kind) const {
  return handles_[static_cast<size_t>(kind)];
}

caf::error database::stage(rocksdb::WriteBatch& wb, const write_batch& batch, uint64_t& seq) {
  for (auto& r : batch.records) {
    if (r.kind == record_kind::events)
      return make_error(errc::invalid_argument,
                        "events are appended through write_batch::events, not as records");
    if (r.empty_range())
      continue; // else the store would end short of its acknowledged mark at recovery
    auto st = !r.erase              ? wb.Put(handle(r.kind), r.key, r.value)
              : r.erase_to.empty() ? wb.Delete(handle(r.kind), r.key)
                                   : wb.DeleteRange(handle(r.kind), r.key, r.erase_to);
    if (!st.ok())
      return to_error(st, path_, "cannot stage write to");
  }
  // A mirrored batch's events keep the leader's numbers; the log goes on after the newest.
  uint64_t next = batch.first_event_seq ? batch.first_event_seq : seq + 1;
  for (auto& e : batch.events) {
    auto st = wb.Put(handle(record_kind::events), event_key(next), e);
    if (!st.ok())
      return to_error(st, path_, "cannot stage event for");
    seq = std::max(seq, next++);
  }
  return {};
}

caf::expected<uint64_t> database::write(const write_batch& batch) {
  auto seqs = write_all({&batch});
  if (!seqs)
    return seqs.error();
  return seqs->front();
}

caf::expected<std::vector<uint64_t>>
database::write_all(const std::vector<const write_batch*>& batches) {
  rocksdb::WriteBatch wb;
  rocksdb::WriteOptions wo;
  wo.sync = false;
  auto seq = last_event_seq_;
  std::vector<uint64_t> seqs;
  for (auto* batch : batches) {
    if (auto err = stage(wb, *batch, seq))
      return err;
    seqs.push_back(seq);
    wo.sync |= batch->sync;
  }
  if (broken_)
    return make_error(errc::storage_read_only,
                      fmt::format("database {} failed a write before; it takes none", path_));
  if (auto err = check_identity())
    return err;
  auto st = db_->Write(wo, &wb);
  if (!st.ok()) {
    broken_ = true;
    return to_error(st, path_, "cannot write to");
  }
  last_event_seq_ = seq;
  if (wo.sync)
    if (auto err = mark_synced(false))
      return err;
  return seqs;
}

caf::expected<std::optional<std::string>> database::get(record_kind kind, std::string_view key) {
  std::string value;
  auto st = db_->Get(rocksdb::ReadOptions{}, handle(kind), rocksdb::Slice{key.data(), key.size()},
                     &value);
  if (st.IsNotFound())
    return std::optional<std::string>{};
  if (!st.ok())
    return to_error(st, path_, "cannot read from");
  return std::optional<std::string>{std::move(value)};
}

caf::expected<std::vector<stored_record>> database::scan(record_kind kind,
                                                         std::string_view prefix) {
  std::vector<stored_record> out;
  std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator(rocksdb::ReadOptions{}, handle(kind))};
  rocksdb::Slice p{prefix.data(), prefix.size()};
  for (it->Seek(p); it->Valid() && it->key().starts_with(p); it->Next())
    out.push_back({it->key().ToString(), it->value().ToString()});
  if (!it->status().ok())
    return to_error(it->status(), path_, "cannot scan");
  return out;
}

caf::expected<std::vector<stored_record>> database::read_events(uint64_t from, size_t limit) {
  std::vector<stored_record> out;
  std::unique_ptr<rocksdb::Iterator> it{
    db_->NewIterator(rocksdb::ReadOptions{}, handle(record_kind::events))};
  for (it->Seek(event_key(from)); it->Valid() && out.size() < limit; it->Next())
    out.push_back({it->key().ToString(), it->value().ToString()});
  if (!it->status().ok())
    return to_error(it->status(), path_, "cannot read events of");
  return out;
}

caf::error database::clear() {
  rocksdb::WriteBatch wb;
  for (auto kind : all_values<record_kind>()) {
    std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator(rocksdb::ReadOptions{}, handle(kind))};
    for (it->SeekToFirst(); it->Valid(); it->Next())
      if (kind != record_kind::meta || it->key() != rocksdb::Slice{"store"})
        wb.Delete(handle(kind), it->key());
    if (!it->status().ok())
      return to_error(it->status(), path_, "cannot clear");
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (auto st = db_->Write(wo, &wb); !st.ok()) {
    broken_ = true;
    return to_error(st, path_, "cannot clear");
  }
  last_event_seq_ = 0;
  return mark_synced(false);
}

uint64_t database::count(record_kind kind) {
  uint64_t n = 0;
  std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator(rocksdb::ReadOptions{}, handle(kind))};
  for (it->SeekToFirst(); it->Valid(); it->Next())
    ++n;
  return n;
}

caf::error database::check_identity() {
  if (read_only_ || (!lost_ && identity_of(path_) == identity_))
    return caf::none;
  lost_ = true;
  return make_error(errc::storage_read_only,
                    fmt::format("the store directory {} was removed or replaced under this "
                                "service: it takes no more writes (they would go with the "
                                "removed files); restore the store and restart the service",
                                path_));
}

caf::error database::flush() {
  if (read_only_)
    return caf::none;
  if (broken_)
    return make_error(errc::storage_read_only,
                      fmt::format("database {} failed a write before; it cannot sync", path_));
  if (auto err = check_identity())
    return err;
  auto st = db_->FlushWAL(true);
  if (!st.ok()) {
    broken_ = true;
    return to_error(st, path_, "cannot flush");
  }
  return mark_synced(true);
}

} // namespace loom
