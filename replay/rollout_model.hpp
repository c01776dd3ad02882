#pragma once
// What one iteration of a simulated RL job actually costs, below its worst case (WEAVE §3 C2,
// Fig. 12): each of the batch's responses has a heavy-tailed length (log-normal, truncated at
// the maximum token limit, so a few stragglers hit the limit). Decoding is memory-bound, so a
// response takes time proportional to its length and the rollout ends with its longest
// response; training cost has a fixed part and a part linear in the generated tokens. Pure:
// the draw depends only on (seed, job, iteration), so every policy replays the same work.

#include <cstdint>
#include <vector>

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

/// One iteration's batch of response lengths, as fractions of the maximum: the longest, the
/// one at the tail threshold, and the mean.
struct length_draw {
  double longest = 0;
  double tail = 0;
  double mean = 0;
};

/// The batch of iteration `iteration` of job `job` under `seed`: one independent stream per
/// (seed, job, iteration), whichever order policies ask in.
length_draw draw_lengths(const response_lengths& lengths, double tail_threshold, uint64_t seed,
                         uint64_t job, uint64_t iteration);

/// What the drawn batch costs a job whose worst case is (rollout, training), drifted to
/// `progress` of its lifetime.
realized_iteration realize(double worst_rollout_s, double worst_training_s, const length_draw& d,
                           drift_template drift, double progress);

/// draw_lengths() remembered for one replay: every policy of a scenario runs the same
/// iterations, so each batch is drawn once and served to the others.
class length_draws {
public:
  length_draws(response_lengths lengths, double tail_threshold, uint64_t seed)
      : lengths_{lengths}, tail_threshold_{tail_threshold}, seed_{seed} {}

  const length_draw& get(uint64_t job, uint64_t iteration);

private:
  response_lengths lengths_;
  double tail_threshold_;
  uint64_t seed_;
  std::vector<std::vector<length_draw>> by_job_; // [job][iteration]; longest < 0: not drawn
};

} // namespace loom::replay
