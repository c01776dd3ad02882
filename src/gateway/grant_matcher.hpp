#pragma once
// WEAVE §5.1 run permits over the wire, pure: a worker's PhaseAcquire blocks until the
// executor's permit for that job and phase, and the permit waits for the worker; whichever
// comes first waits for the other. A permit is consumed by the first acquire that matches it.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/types.hpp"

namespace loom {

/// A PhaseAcquire waiting for its permit: who to answer, and since when.
struct acquire_waiter {
  std::string identity;   // the connection to answer on
  uint64_t request_id = 0;
  std::chrono::steady_clock::time_point since;
};

class grant_matcher {
public:
  /// A worker asks for a phase: the permit if the executor already gave it (it is consumed),
  /// else nothing, and the worker waits.
  std::optional<phase_grant> acquire(const std::string& job, phase_kind phase,
                                     acquire_waiter waiter);

  /// The executor permits a phase: the workers waiting for it, to be answered now. If none
  /// waits, the permit is kept for the first to ask.
  std::vector<acquire_waiter> grant(const phase_grant& g);

  /// The job left its group: its waiting workers and unclaimed permits go; the waiters are
  /// returned.
  std::vector<acquire_waiter> drop(const std::string& job);

  size_t waiting() const;
  size_t kept() const { return granted_.size(); }

private:
  using key = std::pair<std::string, phase_kind>;
  std::map<key, std::vector<acquire_waiter>> acquiring_;
  std::map<key, phase_grant> granted_;
};

} // namespace loom
