#pragma once
// Persist-then-answer: the one way an actor makes a decision durable before anyone hears of it
// (every acknowledged decision is in RocksDB first). The decision's event is appended to the
// batch at the actor's clock time; once the store confirms the write, the event's structured
// log line is written (the same key=value text the event log keeps) and `then` runs. A failed
// write runs `fail` instead, and is logged as such. Include from actor sources only.

#include <caf/all.hpp>

#include <utility>

#include "core/actors.hpp"
#include "store/codecs.hpp"

namespace loom {

/// The event's line in the service log: `event=KIND SUBJECT_KEY=SUBJECT DETAIL`.
void log_event(const loom_event& event);

/// The failed write of an event's batch, logged.
void log_unstored(const loom_event& event, const caf::error& err);

template <class Self, class Then, class Fail>
void persist(Self* self, const store_actor& store, write_batch batch, loom_event event, Then then,
             Fail fail) {
  batch.events.push_back(encode_event(self->clock().now().time_since_epoch().count(), event));
  self->request(store, caf::infinite, write_atom::value, std::move(batch))
    .then(
      [event, then = std::move(then)](uint64_t) mutable {
        log_event(event);
        then();
      },
      [event, fail = std::move(fail)](caf::error& err) mutable {
        log_unstored(event, err);
        fail(std::move(err));
      });
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
