#include "store/store_actor.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/codecs.hpp"

namespace loom {

namespace {

using store_ptr = store_actor::stateful_pointer<store_state>;

caf::error failed(store_ptr self, caf::error err) {
  self->state.metrics->store_errors().Increment();
  spdlog::warn("event=store_request_failed error=\"{}\"", render(err));
  return err;
}

void count(service_metrics& m, const write_batch& batch) {
  m.store_batches().Increment();
  for (auto& r : batch.records)
    m.store_writes(std::string{to_string(r.kind)}).Increment();
  if (!batch.events.empty())
    m.store_writes("events").Increment(static_cast<double>(batch.events.size()));
}

void set_writable(store_ptr self, bool writable) {
  self->state.metrics->store_writable().Set(writable ? 1 : 0);
}

caf::error read_only_error(const store_state& st) {
  return make_error(errc::storage_read_only,
                    fmt::format("storage is read-only ({}); nothing was stored, send it again "
                                "later",
                                st.read_only_reason));
}

/// The store on disk is not the one this service opened: reads come from the handle it has,
/// and nothing reopens the path, which holds another store or none (a fresh open there would
/// take writes into an empty store, and the state this service stands on would be gone).
void enter_lost(store_ptr self, const caf::error& cause) {
  auto& st = self->state;
  st.read_only_reason = message_of(cause);
  set_writable(self, false);
  spdlog::error("event=store_lost path={} reason=\"{}\"", st.path, st.read_only_reason);
}

/// A write or sync failed: serve reads from a read-only open and retry a writable one.
void enter_read_only(store_ptr self, const caf::error& cause) {
  auto& st = self->state;
  if (st.db && st.db->lost())
    return enter_lost(self, cause);
  st.read_only_reason = message_of(cause);
  set_writable(self, false);
  spdlog::error("event=store_read_only path={} reason=\"{}\"", st.path, st.read_only_reason);
  st.db.reset(); // closes the broken handle: it takes no more writes
  if (auto ro = database::open_read_only(st.path, st.read_only_reason))
    st.db = std::move(*ro);
  else
    spdlog::error("event=store_unreadable path={} error=\"{}\"", st.path, render(ro.error()));
  self->delayed_send(self, reopen_interval, tick_atom::value);
}

void try_reopen(store_ptr self) {
  auto& st = self->state;
  if (st.read_only_reason.empty())
    return;
  auto rw = database::open(st.path);
  if (!rw) {
    spdlog::debug("event=store_reopen_failed path={} error=\"{}\"", st.path, render(rw.error()));
    st.reopen_delay = std::min(st.reopen_delay * 2, max_reopen_interval);
    self->delayed_send(self, st.reopen_delay, tick_atom::value);
    return;
  }
  st.db = std::move(*rw);
  spdlog::warn("event=store_writable path={} was_read_only_because=\"{}\" last_event_seq={}",
               st.path, st.read_only_reason, st.db->last_event_seq());
  st.read_only_reason.clear();
  st.reopen_delay = reopen_interval;
  set_writable(self, true);
}

/// Checks that the store on disk is still the one opened, then again every watch_interval, so
/// that its loss raises the alarm before a write finds it.
void watch(store_ptr self) {
  auto& st = self->state;
  if (st.read_only_reason.empty() && st.db)
    if (auto err = st.db->check_identity())
      enter_lost(self, err);
  if (!st.db || !st.db->lost())
    self->delayed_send(self, watch_interval, health_atom::value);
}

/// The database to read from, or why there is none.
caf::expected<database*> readable(store_ptr self) {
  if (!self->state.db)
    return failed(self, read_only_error(self->state));
  return self->state.db.get();
}

/// Applies every queued write as one (group commit) and answers each writer.
void commit_queued(store_ptr self) {
  auto& st = self->state;
  if (st.queued.empty())
    return;
  auto batches = std::move(st.queued);
  auto waiting = std::move(st.waiting);
  st.queued.clear();
  st.waiting.clear();
  std::vector<const write_batch*> all;
  bool sync = false;
  for (auto& b : batches) {
    all.push_back(&b);
    sync |= b.sync;
  }
  auto fail_all = [&](caf::error err) {
    err = failed(self, std::move(err));
    for (auto& rp : waiting)
      rp.deliver(err);
    return err;
  };
  if (!st.read_only_reason.empty()) {
    fail_all(read_only_error(st));
    return;
  }
  // [ha]: etcd first, then the local copy at the revision etcd gave (unsynced: etcd holds it).
  write_batch mark;
  if (st.replica) {
    auto revision = st.replica->commit(all, st.db->last_event_seq() + 1);
    if (!revision) {
      fail_all(revision.error());
      return;
    }
    mark.records.push_back(ha_revision_write(*revision));
    all.push_back(&mark);
    for (auto& b : batches)
      b.sync = false;
    sync = false;
  }
  auto seqs = st.db->write_all(all);
  if (!seqs) {
    auto err = fail_all(seqs.error());
    if (st.replica)
      st.replica->diverged(err);
    if (st.db->broken() || st.db->lost())
      enter_read_only(self, err);
    return;
  }
  if (sync)
    st.metrics->store_syncs().Increment();
  for (size_t i = 0; i < batches.size(); ++i) {
    count(*st.metrics, batches[i]);
    waiting[i].deliver((*seqs)[i]);
  }
}

caf::result<uint64_t> queue(store_ptr self, write_batch batch) {
  for (auto& r : batch.records)
    if (r.kind == record_kind::events)
      return failed(self, make_error(errc::invalid_argument, "events are appended through "
                                                             "write_batch::events, not as "
                                                             "records"));
  auto& st = self->state;
  if (!st.read_only_reason.empty())
    return failed(self, read_only_error(st));
  if (st.queued.empty())
    self->send(self, drain_atom::value); // after everything already in the mailbox
  st.queued.push_back(std::move(batch));
  st.waiting.push_back(self->make_response_promise<uint64_t>());
  return st.waiting.back();
}

} // namespace

store_state::~store_state() {
  if (!db || !read_only_reason.empty())
    return;
  if (auto err = db->flush())
    spdlog::error("event=store_flush_failed path={} error=\"{}\"", db->path(), render(err));
  else
    spdlog::info("event=store_closed path={} last_event_seq={}", db->path(),
                 db->last_event_seq());
}

store_actor::behavior_type store(store_actor::stateful_pointer<store_state> self,
                                 std::shared_ptr<database> db,
                                 std::shared_ptr<service_metrics> metrics) {
  return replicated_store(self, std::move(db), std::move(metrics), nullptr);
}

store_actor::behavior_type replicated_store(store_actor::stateful_pointer<store_state> self,
                                            std::shared_ptr<database> db,
                                            std::shared_ptr<service_metrics> metrics,
                                            std::shared_ptr<replication> replica) {
  auto& st = self->state;
  st.db = std::move(db);
  st.metrics = std::move(metrics);
  st.replica = std::move(replica);
  st.path = st.db->path();
  if (st.db->read_only())
    st.read_only_reason = st.db->read_only_cause();
  set_writable(self, st.read_only_reason.empty());
  if (!st.read_only_reason.empty())
    self->delayed_send(self, reopen_interval, tick_atom::value);
  return {
    [self](drain_atom) { commit_queued(self); },
    [self](tick_atom) { try_reopen(self); },
    [self](health_atom) { watch(self); },
    [self](write_atom, write_batch& batch) { return queue(self, std::move(batch)); },
    [self](get_atom, record_kind kind, const std::string& key) -> caf::result<std::string> {
      commit_queued(self);
      auto db = readable(self);
      if (!db)
        return db.error();
      auto value = (*db)->get(kind, key);
      if (!value)
        return failed(self, value.error());
      if (!*value)
        return make_error(errc::not_found,
                          fmt::format("no {} record with key '{}'", to_string(kind), key));
      return std::move(**value);
    },
    [self](scan_atom, record_kind kind,
           const std::string& prefix) -> caf::result<std::vector<stored_record>> {
      commit_queued(self);
      auto db = readable(self);
      if (!db)
        return db.error();
      auto records = (*db)->scan(kind, prefix);
      if (!records)
        return failed(self, records.error());
      return std::move(*records);
    },
    [self](events_atom, uint64_t from, uint64_t limit) -> caf::result<std::vector<stored_record>> {
      commit_queued(self);
      auto db = readable(self);
      if (!db)
        return db.error();
      auto records = (*db)->read_events(from, static_cast<size_t>(limit));
      if (!records)
        return failed(self, records.error());
      return std::move(*records);
    },
    [self](flush_atom) -> caf::result<ok_atom> {
      commit_queued(self);
      auto& st = self->state;
      if (!st.read_only_reason.empty())
        return ok_atom::value; // it took no write since it last synced one
      if (auto err = st.db->flush()) {
        enter_read_only(self, err);
        return failed(self, std::move(err));
      }
      return ok_atom::value;
    },
  };
}

} // namespace loom
