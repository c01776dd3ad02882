#pragma once
// One request on the virtual clock, as a script: a client actor sends it, the driver runs until
// nothing is pending, and the answer (or error) comes back with the virtual time it took.

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

template <class T, class Handle, class... Ts>
answer<T> request_now(driver& drv, const Handle& h, Ts... xs) {
  answer<T> out;
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
  drv.run_to_quiescence();
  return out;
}

} // namespace loom::replay
