#pragma once
// WEAVE §5.1 run permits over the wire, pure: a worker's PhaseAcquire blocks until the
// executor's permit for that job and phase, and the permit waits for the worker; whichever
// comes first waits for the other. A permit holds until the phase is released (every worker of
// the job asking for it meanwhile gets it) or the job leaves.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "types/scheduler.hpp"

namespace loom {

/// A PhaseAcquire waiting for its permit: who to answer, and since when.
struct acquire_waiter {
  std::string identity;   // the connection to answer on
  uint64_t request_id = 0;
  std::chrono::steady_clock::time_point since;
};

class grant_matcher {
public:
  /// A worker asks for a phase: the permit if the executor gave it, else nothing, and the
  /// worker waits.
  std::optional<phase_grant> acquire(const std::string& job, phase_kind phase,
                                     acquire_waiter waiter);

  /// The executor permits a phase: the workers waiting for it, to be answered now. The permit
  /// holds for those who ask later, until the phase is released.
  std::vector<acquire_waiter> grant(const phase_grant& g);

  /// The executor's permit for the phase stands (granted, not yet released).
  bool held(const std::string& job, phase_kind phase) const {
    return granted_.count(key{job, phase}) > 0;
  }

  /// The phase was reported done: its permit is used up.
  void release(const std::string& job, phase_kind phase);

  /// The job left its group: its waiting workers (returned, to be answered) and its permits go.
  std::vector<acquire_waiter> drop(const std::string& job);

  /// The job's permits go (it left its group to be placed again); its workers keep waiting.
  void revoke(const std::string& job);

  /// Workers of the job waiting, for any phase.
  bool waiting(const std::string& job) const;
  /// The job's waiting requests and the phase each waits for (left waiting).
  std::vector<std::pair<phase_kind, acquire_waiter>> waiters(const std::string& job) const;
  /// This request still waits.
  bool waiting(const std::string& job, phase_kind phase, const std::string& identity,
               uint64_t request_id) const;
  /// Takes one waiting request out (to answer it otherwise); false if it no longer waits.
  bool withdraw(const std::string& job, phase_kind phase, const std::string& identity,
                uint64_t request_id);
  /// Every waiting request, taken out.
  std::vector<acquire_waiter> drop_all();
  /// The requests a connection has waiting, taken out (its session is gone); how many.
  size_t drop_connection(const std::string& identity);
  /// Requests a connection has waiting.
  size_t waiting_on(const std::string& identity) const;

  size_t waiting() const { return waiting_; }
  size_t kept() const { return granted_.size(); }

private:
  using key = std::pair<std::string, phase_kind>;
  /// Waiters answered or dropped leave the counts.
  void forget(const std::vector<acquire_waiter>& answered);

  std::map<key, std::vector<acquire_waiter>> acquiring_;
  std::map<key, phase_grant> granted_;
  std::map<std::string, size_t> per_connection_; // identity -> its waiting requests
  size_t waiting_ = 0;
};

} // namespace loom
