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

#include "core/actors.hpp"
#include "core/policy.hpp"
#include "scheduler/iteration_ledger.hpp"
#include "scheduler/phase_costs.hpp"
#include "scheduler/round_robin.hpp"

namespace loom {

struct group_executor_config {
  std::string group;
  int gpus_per_rollout_node = 8;
  int gpus_per_training_node = 8;
  int training_gpus = 8; // the group's training pool
  weave_policy policy;
  bool migrate_tails = true;
  bool sync_writes = true;
  // Names of the rollout pool's nodes by index, for the reasons a job waits.
  std::shared_ptr<const std::vector<std::string>> rollout_node_names;
};

/// A permitted phase being watched for overruns (WEAVE §5.3 stragglers).
struct watched_phase {
  uint64_t sequence = 0; // of the grant; a timer for an older one is stale
  phase_kind phase = phase_kind::rollout;
  int64_t since_ns = 0;
  phase_deadlines deadlines;
  bool overran = false;
};

struct group_executor_state {
  static inline const char* name = "group_executor";
  group_executor_config config;
  std::unique_ptr<round_robin> schedule;
  std::optional<iteration_ledger> ledger;
  std::map<std::string, turn_place> restored; // places kept from before a restart, until staged
  std::map<std::string, watched_phase> watched;
  uint64_t next_sequence = 1;
  worker_actor worker;
  cluster_scheduler_actor scheduler;
  observer_actor observer;
  store_actor store;
};

group_executor_actor::behavior_type
group_executor(group_executor_actor::stateful_pointer<group_executor_state> self,
               group_executor_config config, worker_actor worker,
               cluster_scheduler_actor scheduler, observer_actor observer, store_actor store);

} // namespace loom
