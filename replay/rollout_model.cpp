#include "replay/rollout_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "replay/counter_rng.hpp"

namespace loom::replay {

length_draw draw_lengths(const response_lengths& lengths, double tail_threshold, uint64_t seed,
                         uint64_t job, uint64_t iteration) {
  counter_stream rng{seed, job, iteration};
  const int n = std::max(1, lengths.batch);
  std::vector<double> frac(static_cast<size_t>(n), 0.0);
  const double mu = std::log(lengths.median_fraction);
  double sum = 0;
  for (auto& f : frac) {
    f = std::min(1.0, std::exp(mu + lengths.sigma * rng.normal()));
    sum += f;
  }
  const size_t k = std::min(size_t(n) - 1, size_t(std::ceil(tail_threshold * n)) - 1);
  std::nth_element(frac.begin(), frac.begin() + long(k), frac.end());
  const double tail = frac[k];
  // nth_element leaves the longest after k.
  const double longest = *std::max_element(frac.begin() + long(k), frac.end());
  return {longest, tail, sum / n};
}

realized_iteration realize(double worst_rollout_s, double worst_training_s, const length_draw& d,
                           drift_template drift, double progress) {
  const double scale = std::max(0.05, 1 + drift.slope * std::clamp(progress, 0.0, 1.0));
  realized_iteration r;
  r.rollout_s = worst_rollout_s * d.longest * scale;
  r.tail_s = worst_rollout_s * d.tail * scale;
  r.training_s = worst_training_s * scale
                 * (fixed_training_fraction + (1 - fixed_training_fraction) * d.mean);
  return r;
}

const length_draw& length_draws::get(uint64_t job, uint64_t iteration) {
  if (by_job_.size() <= job)
    by_job_.resize(job + 1);
  auto& draws = by_job_[job];
  if (draws.size() <= iteration)
    draws.resize(iteration + 1, length_draw{-1, 0, 0});
  auto& d = draws[iteration];
  if (d.longest < 0)
    d = draw_lengths(lengths_, tail_threshold_, seed_, job, iteration);
  return d;
}

} // namespace loom::replay
