#pragma once
// A blocking request, for a service still starting: it reads what the store kept, or waits
// for an actor to confirm it has restored its state, before it goes on.

#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

namespace loom {

/// The answer to one request, or its error; waits as long as the answer takes.
template <class T, class Handle, class... Ts>
caf::expected<T> ask_now(caf::actor_system& sys, const Handle& actor, Ts... xs) {
  caf::expected<T> out{caf::error{}};
  caf::scoped_actor self{sys};
  self->request(actor, caf::infinite, xs...)
    .receive([&](T& r) { out = std::move(r); }, [&](caf::error& err) { out = std::move(err); });
  return out;
}

} // namespace loom
