#pragma once
// When an RL step's trainer runs and the next step's generation may start, pure. Training of
// step k starts once its generation and the training of step k-1 are done. Synchronous, step
// k+1's generation waits for that training; one step asynchronous (OrchestrRL §2 Fig. 1c,
// §6), it starts with it, on weights one step stale, so a step costs max(its generation, the
// trainer's step) rather than their sum. The simulated framework, `loom drive` and the
// report's RL time all step this one clock.

#include <algorithm>

namespace loom::replay {

class rl_step_clock {
public:
  rl_step_clock(double training_s, int off_policy_steps)
      : training_s_(training_s), overlapped_(off_policy_steps > 0) {}

  /// A step's generation ended at `generation_end`: its training is scheduled, and the next
  /// step's generation may start at the time returned.
  double step_ended(double generation_end) {
    const double training_start = std::max(generation_end, training_end_);
    training_end_ = training_start + training_s_;
    return overlapped_ ? training_start : training_end_;
  }

  /// When the trainer finishes the last step it was given.
  double training_end() const { return training_end_; }

private:
  double training_s_;
  bool overlapped_;
  double training_end_ = 0;
};

} // namespace loom::replay
