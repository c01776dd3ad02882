#include "store/store_actor.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "core/inspect.hpp"

namespace loom {

store_state::~store_state() {
  if (!db)
    return;
  if (auto err = db->flush())
    spdlog::error("event=store_flush_failed path={} error=\"{}\"", db->path(), render(err));
  else
    spdlog::info("event=store_closed path={} last_event_seq={}", db->path(),
                 db->last_event_seq());
  metrics->actors_up("store").Decrement();
}

store_actor::behavior_type store(store_actor::stateful_pointer<store_state> self,
                                 std::shared_ptr<database> db,
                                 std::shared_ptr<service_metrics> metrics) {
  self->state.db = std::move(db);
  self->state.metrics = std::move(metrics);
  self->state.metrics->actors_up("store").Increment();
  auto failed = [self](caf::error err) {
    self->state.metrics->store_errors().Increment();
    spdlog::warn("event=store_request_failed error=\"{}\"", render(err));
    return err;
  };
  return {
    [self, failed](write_atom, const write_batch& batch) -> caf::result<uint64_t> {
      auto seq = self->state.db->write(batch);
      if (!seq)
        return failed(seq.error());
      auto& m = *self->state.metrics;
      m.store_batches().Increment();
      for (auto& r : batch.records)
        m.store_writes(std::string{to_string(r.kind)}).Increment();
      if (!batch.events.empty())
        m.store_writes("events").Increment(static_cast<double>(batch.events.size()));
      return *seq;
    },
    [self, failed](get_atom, record_kind kind, const std::string& key)
      -> caf::result<std::string> {
      auto value = self->state.db->get(kind, key);
      if (!value)
        return failed(value.error());
      if (!*value)
        return make_error(errc::not_found,
                          fmt::format("no {} record with key '{}'", to_string(kind), key));
      return std::move(**value);
    },
    [self, failed](scan_atom, record_kind kind, const std::string& prefix)
      -> caf::result<std::vector<stored_record>> {
      auto records = self->state.db->scan(kind, prefix);
      if (!records)
        return failed(records.error());
      return std::move(*records);
    },
    [self, failed](events_atom, uint64_t from, uint64_t limit)
      -> caf::result<std::vector<stored_record>> {
      auto records = self->state.db->read_events(from, static_cast<size_t>(limit));
      if (!records)
        return failed(records.error());
      return std::move(*records);
    },
    [self, failed](flush_atom) -> caf::result<ok_atom> {
      if (auto err = self->state.db->flush())
        return failed(std::move(err));
      return ok_atom::value;
    },
  };
}

} // namespace loom
