#pragma once
// Persist-then-answer: the one way an actor makes a decision durable before anyone hears of it
// (every acknowledged decision is in RocksDB first). The decision's events are appended to the
// batch at the actor's clock time; once the store confirms the write, each event's structured
// log line is written (the same key=value text the event log keeps) and `then` runs. A failed
// write runs `fail` instead, and is logged as such. Include from actor sources only.

#include <caf/all.hpp>

#include <utility>
#include <vector>

#include "protocol/actors.hpp"
#include "records/codecs.hpp"

namespace loom {

/// The event's line in the service log: `event=KIND SUBJECT_KEY=SUBJECT DETAIL`.
void log_event(const loom_event& event);

/// The failed write of an event's batch, logged.
void log_unstored(const loom_event& event, const caf::error& err);

/// Persist-then-act for a batch with any number of events (none: records alone, such as a
/// job's progress or a forecast's history), every event at the same clock time.
template <class Self, class Then, class Fail>
void persist(Self* self, const store_actor& store, write_batch batch,
             std::vector<loom_event> events, Then then, Fail fail) {
  const auto now = self->clock().now().time_since_epoch().count();
  for (auto& e : events)
    batch.events.push_back(encode_event(now, e));
  self->request(store, caf::infinite, write_atom::value, std::move(batch))
    .then(
      [events, then = std::move(then)](uint64_t) mutable {
        for (auto& e : events)
          log_event(e);
        then();
      },
      [events, fail = std::move(fail)](caf::error& err) mutable {
        for (auto& e : events)
          log_unstored(e, err);
        fail(std::move(err));
      });
}

template <class Self, class Then, class Fail>
void persist(Self* self, const store_actor& store, write_batch batch, loom_event event, Then then,
             Fail fail) {
  persist(self, store, std::move(batch), std::vector<loom_event>{std::move(event)},
          std::move(then), std::move(fail));
}

/// Persists, then delivers `answer` on the promise; a failed write delivers the error.
template <class Self, class Promise, class Answer>
void persist_and_deliver(Self* self, const store_actor& store, write_batch batch,
                         loom_event event, Promise promise, Answer answer) {
  persist(
    self, store, std::move(batch), std::move(event),
    [promise, answer = std::move(answer)]() mutable { promise.deliver(std::move(answer)); },
    [promise](caf::error err) mutable { promise.deliver(std::move(err)); });
}

} // namespace loom
