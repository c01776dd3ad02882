#include "replay/rollout_model.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace loom::replay {

realized_iteration sample_iteration(double worst_rollout_s, double worst_training_s,
                                    const response_lengths& lengths, double tail_threshold,
                                    drift_template drift, double progress, uint64_t seed,
                                    uint64_t job, uint64_t iteration) {
  // One independent stream per (seed, job, iteration), whichever order policies ask in.
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(job), uint32_t(job >> 32),
                    uint32_t(iteration), uint32_t(iteration >> 32)};
  std::mt19937_64 rng{seq};
  std::normal_distribution<double> normal{0.0, 1.0};
  const int n = std::max(1, lengths.batch);
  std::vector<double> frac(static_cast<size_t>(n), 0.0);
  const double mu = std::log(lengths.median_fraction);
  double sum = 0;
  for (auto& f : frac) {
    f = std::min(1.0, std::exp(mu + lengths.sigma * normal(rng)));
    sum += f;
  }
  const size_t k = std::min(size_t(n) - 1, size_t(std::ceil(tail_threshold * n)) - 1);
  std::nth_element(frac.begin(), frac.begin() + long(k), frac.end());
  const double tail = frac[k];
  const double longest = *std::max_element(frac.begin(), frac.end());
  const double scale = std::max(0.05, 1 + drift.slope * std::clamp(progress, 0.0, 1.0));
  realized_iteration r;
  r.rollout_s = worst_rollout_s * longest * scale;
  r.tail_s = worst_rollout_s * tail * scale;
  r.training_s = worst_training_s * scale
                 * (fixed_training_fraction + (1 - fixed_training_fraction) * sum / n);
  return r;
}

} // namespace loom::replay
