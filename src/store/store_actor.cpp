#include "store/store_actor.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "core/inspect.hpp"

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
  auto seqs = st.db->write_all(all);
  if (!seqs) {
    auto err = failed(self, seqs.error());
    for (auto& rp : waiting)
      rp.deliver(err);
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
  if (st.queued.empty())
    self->send(self, drain_atom::value); // after everything already in the mailbox
  st.queued.push_back(std::move(batch));
  st.waiting.push_back(self->make_response_promise<uint64_t>());
  return st.waiting.back();
}

} // namespace

store_state::~store_state() {
  if (!db)
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
  self->state.db = std::move(db);
  self->state.metrics = std::move(metrics);
  return {
    [self](drain_atom) { commit_queued(self); },
    [self](write_atom, write_batch& batch) { return queue(self, std::move(batch)); },
    [self](get_atom, record_kind kind, const std::string& key) -> caf::result<std::string> {
      commit_queued(self);
      auto value = self->state.db->get(kind, key);
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
      auto records = self->state.db->scan(kind, prefix);
      if (!records)
        return failed(self, records.error());
      return std::move(*records);
    },
    [self](events_atom, uint64_t from, uint64_t limit) -> caf::result<std::vector<stored_record>> {
      commit_queued(self);
      auto records = self->state.db->read_events(from, static_cast<size_t>(limit));
      if (!records)
        return failed(self, records.error());
      return std::move(*records);
    },
    [self](flush_atom) -> caf::result<ok_atom> {
      commit_queued(self);
      if (auto err = self->state.db->flush())
        return failed(self, std::move(err));
      return ok_atom::value;
    },
  };
}

} // namespace loom
