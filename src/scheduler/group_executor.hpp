#pragma once
// The group_executor actor: one per co-execution group, a thin shell around two cores. The
// round_robin core hands out run permits (WEAVE §4.3, §5.1); the iteration_ledger counts
// iterations, reports them to the observer, says when a job has run all of them (the scheduler
// hears so) and which member drifted (WEAVE §5.3). Workers report phases straight to it.

#include <memory>
#include <optional>
#include <string>

#include "core/actors.hpp"
#include "core/policy.hpp"
#include "scheduler/iteration_ledger.hpp"
#include "scheduler/round_robin.hpp"

namespace loom {

struct group_executor_config {
  std::string group;
  int gpus_per_rollout_node = 8;
  int gpus_per_training_node = 8;
  int training_gpus = 8; // the group's training pool
  weave_policy policy;
  bool migrate_tails = true;
};

struct group_executor_state {
  static inline const char* name = "group_executor";
  group_executor_config config;
  std::unique_ptr<round_robin> schedule;
  std::optional<iteration_ledger> ledger;
  worker_actor worker;
  cluster_scheduler_actor scheduler;
  observer_actor observer;
};

group_executor_actor::behavior_type
group_executor(group_executor_actor::stateful_pointer<group_executor_state> self,
               group_executor_config config, worker_actor worker,
               cluster_scheduler_actor scheduler, observer_actor observer);

} // namespace loom
