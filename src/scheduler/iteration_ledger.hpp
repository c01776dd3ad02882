#pragma once
// A group executor's bookkeeping, pure (WEAVE §4.3, §5.3): per member, the iteration it is in
// and since when, the solo-equivalent work its worker reported, and the phase times it
// measured. From these come the iteration records SLOs are judged on, the moment a job has run
// all its iterations, and the member to re-place when measured phases saturate the group.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "types/scheduler.hpp"

namespace loom {

/// How far a member has got.
struct member_progress {
  group_member member;
  int64_t since_ns = 0; // actor-clock time the current iteration started
  int64_t iteration = 0;
  double solo_s = 0;    // solo-equivalent work of the current iteration so far
  // The longest phases measured since it joined this group: the evidence of drift.
  double longest_rollout_s = 0;
  double longest_training_s = 0;
  bool drift_reported = false;
  int overruns = 0;     // phases that ran past the policy's overrun factor
  // Host memory its workers said each phase's state holds between turns (the largest).
  double rollout_memory_gb = 0;
  double training_memory_gb = 0;
};

/// WEAVE §5.3: a member to stop and re-place with the longest phase times it measured.
struct drift_report {
  std::string job;
  double rollout_s = 0;
  double training_s = 0;
  int64_t iterations_done = 0;
};

/// What a finished sync means: the iteration that ended, and whether it was the job's last
/// (the job then leaves the ledger).
struct iteration_end {
  iteration_record record;
  bool completed = false;
  // The job's profiling pass ended (WEAVE §5 (1)): not an iteration; the job leaves the
  // ledger and is placed with what it measured.
  std::optional<job_profile> profiled;
};

class iteration_ledger {
public:
  /// `training_gpus`: the group's training pool, which members' training is matched to.
  iteration_ledger(std::string group, int training_gpus);

  /// A placed job joins; its first iteration starts now. `iterations_done`: after a restart,
  /// the iterations it completed before.
  void join(const group_member& m, int64_t now_ns, int64_t iterations_done = 0);
  /// False if the job is not a member.
  bool leave(const std::string& job);
  const member_progress* find(const std::string& job) const;
  size_t size() const { return members_.size(); }

  /// The worker finished a phase the executor granted; `solo_s` is how long the same work
  /// takes alone on full GPUs. A sync ends the iteration.
  std::optional<iteration_end> phase_done(const std::string& job, phase_kind phase, double solo_s,
                                          int64_t now_ns);

  /// The job's phase has run `elapsed_s` and is still running, past the overrun factor: that
  /// is a lower bound on what the phase takes now (WEAVE §5.3), counted and measured.
  void overran(const std::string& job, phase_kind phase, double elapsed_s);

  /// A worker of the job measured the host memory its phase's state holds between turns.
  void footprint(const std::string& job, phase_kind phase, double gb);

  /// The member whose measured phases outgrew its profile most, by more than `margin`, once
  /// the measured phases saturate the group (T_load >= T_cycle) or break a member's SLO in
  /// the steady state; each member is reported once. Members within the margin of their
  /// profile are never re-placed: noise and small drift stay where they are.
  std::optional<drift_report> drift_victim(double margin);

private:
  std::string group_;
  int training_gpus_;
  std::map<std::string, member_progress> members_;
};

} // namespace loom
