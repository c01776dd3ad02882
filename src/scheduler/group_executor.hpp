#pragma once
// The group_executor actor: one per co-execution group, a thin shell around the round_robin
// core. It hands run permits to the workers, counts iterations, reports them to the observer,
// tells the scheduler when a job has run all its iterations, and flags drift (WEAVE §5.3).

#include <map>
#include <string>

#include "core/actors.hpp"
#include "core/policy.hpp"
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

  struct member {
    rl_job job;
    std::vector<int> rollout_nodes;
    caf::timespan since{0}; // actor-clock time the current iteration started
    int64_t iteration = 0;
    double solo_s = 0;      // solo-equivalent work of the current iteration so far
    double measured_rollout_s = 0;
    double measured_training_s = 0;
    bool drift_reported = false;
    executor_member schedule; // what the round-robin core gets once the job is staged
  };

  group_executor_config config;
  std::unique_ptr<round_robin> core;
  std::map<std::string, member> members;
  worker_actor worker;
  cluster_scheduler_actor scheduler;
  observer_actor observer;
};

group_executor_actor::behavior_type
group_executor(group_executor_actor::stateful_pointer<group_executor_state> self,
               group_executor_config config, worker_actor worker,
               cluster_scheduler_actor scheduler, observer_actor observer);

} // namespace loom
