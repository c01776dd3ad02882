#include "replay/driver.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "protocol/type_registry.hpp"

namespace loom::replay {

namespace {

caf::actor_system_config& testing_config(caf::actor_system_config& cfg) {
  register_loom_types(cfg);
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  return cfg;
}

} // namespace

struct driver::impl {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  caf::actor_clock::time_point start;

  impl()
    : sys(testing_config(cfg)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
      start(sched.clock().current_time) {
    // Actors still alive at the end are dropped with the system; there is no one to wait for.
    sys.await_actors_before_shutdown(false);
  }
};

driver::driver() : impl_(std::make_unique<impl>()) {}

driver::~driver() {
  // Let every actor see its pending messages (including exits) before the system goes away.
  impl_->sched.run();
}

caf::actor_system& driver::system() {
  return impl_->sys;
}

caf::timespan driver::elapsed() const {
  return impl_->sched.clock().current_time - impl_->start;
}

run_stats driver::run_until(caf::timespan horizon) {
  return run(impl_->start + horizon);
}

run_stats driver::run_to_quiescence() {
  return run(caf::actor_clock::time_point::max());
}

run_stats driver::run(caf::actor_clock::time_point deadline) {
  auto& sched = impl_->sched;
  auto& clock = sched.clock();
  run_stats stats;
  for (;;) {
    stats.messages += sched.run();
    if (!sched.has_pending_timeout()) {
      stats.quiescent = true;
      break;
    }
    if (clock.schedule().begin()->first > deadline) {
      if (clock.current_time < deadline)
        clock.current_time = deadline;
      break;
    }
    sched.trigger_timeout();
    ++stats.timeouts;
  }
  stats.elapsed = elapsed();
  return stats;
}

} // namespace loom::replay
