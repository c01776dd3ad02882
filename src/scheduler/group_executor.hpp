#pragma once
// The group_executor actor: one per co-execution group, a thin shell around two cores. The
// round_robin core hands out run permits (WEAVE §4.3, §5.1); the iteration_ledger counts
// iterations, reports them to the observer, says when a job has run all of them (the scheduler
// hears so) and which member drifted (WEAVE §5.3). Timing comes from the edge: a joined job
// takes its turns once its workers say its state is staged, and a phase ends when its worker
// reports it. Each job's place in the turn order and its iteration count are written to the
// store when it is staged and at every iteration end, so a restart resumes it there.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/actors.hpp"
#include "scheduler/iteration_ledger.hpp"
#include "scheduler/phase_costs.hpp"
#include "scheduler/round_robin.hpp"
#include "types/policy.hpp"

namespace loom {

struct group_executor_config {
  std::string group;
  int gpus_per_rollout_node = 8;
  int gpus_per_training_node = 8;
  int training_gpus = 8; // the group's training pool
  weave_policy policy;
  bool migrate_tails = true;
  bool sync_writes = true;
  // Names of the rollout pool's nodes by index, for grants and the reasons a job waits.
  std::shared_ptr<const std::vector<std::string>> rollout_node_names;
  // The group's training pool, which every training grant names.
  std::vector<std::string> training_node_names;
};

/// A permitted phase being watched for overruns (WEAVE §5.3 stragglers).
struct watched_phase {
  phase_kind phase = phase_kind::rollout;
  int64_t since_ns = 0;
  phase_deadlines deadlines;
  bool overran = false;

  /// When it is checked next: at its overrun deadline, then at its stuck one.
  int64_t due_ns() const {
    return since_ns + int64_t((overran ? deadlines.stuck_s : deadlines.overrun_s) * 1e9);
  }
};

struct group_executor_state {
  static inline const char* name = "group_executor";
  group_executor_config config;
  std::unique_ptr<round_robin> schedule;
  std::optional<iteration_ledger> ledger;
  std::map<std::string, turn_place> restored; // places kept from before a restart, until staged
  std::map<std::string, watched_phase> watched;
  // One alarm for the earliest due watched phase (0: none set): most phases end long before
  // theirs, and a timer per permit would be most of a replay's messages.
  int64_t alarm_ns = 0;
  // Releases waiting for their job's progress to be durable, by a running id. A group that
  // ends first (its last job moved or left) answers them JOB_ENDED as it goes: CAF 0.17 drops
  // an undelivered promise silently, and the worker would wait for an answer that never comes.
  std::map<uint64_t, caf::typed_response_promise<ok_atom>> releases;
  uint64_t next_release = 0;
  worker_actor worker;
  cluster_scheduler_actor scheduler;
  observer_actor observer;
  store_actor store;

  ~group_executor_state();
};

group_executor_actor::behavior_type
group_executor(group_executor_actor::stateful_pointer<group_executor_state> self,
               group_executor_config config, worker_actor worker,
               cluster_scheduler_actor scheduler, observer_actor observer, store_actor store);

} // namespace loom
