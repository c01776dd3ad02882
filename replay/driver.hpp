#pragma once
// Runs actors on virtual time. The actor system uses CAF's `testing` scheduler: messages run
// one at a time on the caller's thread in a fixed order, and delayed messages wait on a clock
// that only moves when the driver triggers the next timeout. A simulated week costs only the
// messages it contains, and the same inputs give the same event order and timestamps.

#include <chrono>
#include <cstddef>
#include <memory>

#include <caf/actor_clock.hpp>
#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

namespace caf::scheduler {
class test_coordinator;
}

namespace loom::replay {

struct run_stats {
  size_t messages = 0;        // messages processed
  size_t timeouts = 0;        // delayed messages and timeouts fired
  caf::timespan elapsed{0};   // virtual time since the driver started
  bool quiescent = false;     // true: nothing left to do; false: stopped at the horizon
};

class driver {
public:
  driver();
  ~driver();
  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;

  caf::actor_system& system();

  /// Virtual time since the driver started.
  caf::timespan elapsed() const;

  /// Processes messages and fires timeouts in time order until nothing is pending or the next
  /// timeout lies beyond `horizon` (virtual time since start). In the second case the clock
  /// stops exactly at the horizon.
  run_stats run_until(caf::timespan horizon);

  /// Runs until nothing is pending, however far in virtual time that is.
  run_stats run_to_quiescence();

private:
  run_stats run(caf::actor_clock::time_point deadline);

  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace loom::replay
