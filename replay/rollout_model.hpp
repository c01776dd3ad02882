#pragma once
// What one iteration of a simulated RL job actually costs, below its worst case (WEAVE §3 C2,
// Fig. 12): each of the batch's responses has a heavy-tailed length (log-normal, truncated at
// the maximum token limit, so a few stragglers hit the limit). Decoding is memory-bound, so a
// response takes time proportional to its length and the rollout ends with its longest
// response; training cost has a fixed part and a part linear in the generated tokens. Pure:
// the draw depends only on (seed, job, iteration), so every policy replays the same work.

#include <cstdint>

namespace loom::replay {

struct response_lengths {
  double median_fraction = 0.25; // median length / max length
  double sigma = 0.8;            // log-normal shape
  int batch = 256;
};

/// Drift of a job's phase profile over its lifetime (WEAVE §6.6, Fig. 16): the rollout and
/// training work scale by 1 + slope * progress, progress in [0, 1].
struct drift_template {
  double slope = 0;
};

struct realized_iteration {
  double rollout_s = 0; // whole rollout alone on all its GPUs
  double tail_s = 0;    // when the tail threshold of its responses is done
  double training_s = 0; // at the job's own training GPUs
};

/// Fraction of worst-case training time spent regardless of generated tokens.
constexpr double fixed_training_fraction = 0.3;

realized_iteration sample_iteration(double worst_rollout_s, double worst_training_s,
                                    const response_lengths& lengths, double tail_threshold,
                                    drift_template drift, double progress, uint64_t seed,
                                    uint64_t job, uint64_t iteration);

} // namespace loom::replay
