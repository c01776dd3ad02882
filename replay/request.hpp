#pragma once
// One request on the virtual clock, as a script: a client actor sends it, the driver runs until
// nothing is pending (or a horizon), and the answer (or error) comes back with the virtual time
// it took.

#include <caf/event_based_actor.hpp>
#include <caf/actor_system.hpp>

#include <optional>

#include "replay/driver.hpp"

namespace loom::replay {

template <class T>
struct answer {
  std::optional<T> value;
  caf::error error;
  caf::timespan after{0};
};

/// Sends the request from a client actor whose answer lands in `out`.
template <class T, class Handle, class... Ts>
void send_request(driver& drv, answer<T>& out, const Handle& h, Ts... xs) {
  drv.system().spawn([h, &out, xs...](caf::event_based_actor* self) {
    auto start = self->clock().now();
    self->request(h, caf::infinite, xs...)
      .then(
        [&out, self, start](T v) {
          out.value = std::move(v);
          out.after = self->clock().now() - start;
        },
        [&out](caf::error& e) { out.error = e; });
  });
}

template <class T, class Handle, class... Ts>
answer<T> request_now(driver& drv, const Handle& h, Ts... xs) {
  answer<T> out;
  send_request(drv, out, h, xs...);
  drv.run_to_quiescence();
  return out;
}

/// For actors that never fall quiet (periodic timers): runs until `horizon` (virtual time
/// since start) only.
template <class T, class Handle, class... Ts>
answer<T> request_until(driver& drv, caf::timespan horizon, const Handle& h, Ts... xs) {
  answer<T> out;
  send_request(drv, out, h, xs...);
  drv.run_until(horizon);
  return out;
}

} // namespace loom::replay
