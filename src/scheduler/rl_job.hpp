#pragma once
// An RL job as the scheduler sees it (WEAVE §4.2): its GPU needs, host-memory working sets,
// SLO, and worst-case phase durations profiled at the maximum token limit.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

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
  double sync_s = 0;             // model sync after training (derived from model_gb)
  std::string name;
  std::string model;
  int max_response_tokens = 0;
  int batch_size = 0;
  bool multi_turn = false;
  double model_gb = 0;           // weights to sync to the rollout pool every iteration
  int64_t iterations = 0;        // iterations to run; 0: until finished or cancelled
  // Warm starts each phase pays when it follows another job's phase on the same GPUs
  // (derived from the working sets, like sync_s); planning adds them once a group is shared.
  double rollout_switch_s = 0;
  double training_switch_s = 0;

  /// Iteration time alone on dedicated pools: rollout -> train -> sync.
  double solo_s() const { return rollout_s + training_s + sync_s; }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rl_job& x) {
  return f(caf::meta::type_name("rl_job"), x.id, x.rollout_gpus, x.training_gpus,
           x.rollout_memory_gb, x.training_memory_gb, x.slo, x.rollout_s, x.training_s, x.sync_s,
           x.name, x.model, x.max_response_tokens, x.batch_size, x.multi_turn, x.model_gb,
           x.iterations, x.rollout_switch_s, x.training_switch_s);
}

} // namespace loom
