#pragma once
// An RL job as the scheduler sees it (WEAVE §4.2): its GPU needs, host-memory working sets,
// SLO, and worst-case phase durations profiled at the maximum token limit.

#include <string>

namespace loom {

struct rl_job {
  std::string id;
  int rollout_gpus = 0;
  int training_gpus = 0;
  double rollout_memory_gb = 0; // working set cached per rollout node (warm start)
  double training_memory_gb = 0; // training state cached per training node
  double slo = 1.5;              // tolerated slowdown of an iteration vs. solo
  double rollout_s = 0;          // worst-case rollout phase
  double training_s = 0;         // worst-case training phase at `training_gpus`
  double sync_s = 0;             // model sync after training

  /// Iteration time alone on dedicated pools: rollout -> train -> sync.
  double solo_s() const { return rollout_s + training_s + sync_s; }
};

} // namespace loom
