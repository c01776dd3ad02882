#include "generation/plan_error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace loom {

void plan_error::decided(plan_choice c) {
  if (!std::isfinite(c.predicted_gain_s) || c.chosen == c.other)
    return;
  std::erase_if(pending_, [&](auto& p) { return p.step != c.step; }); // an older step's
  if (pending_.size() < per_step_)
    pending_.push_back(std::move(c));
}

void plan_error::ended(uint64_t step, const std::unordered_map<uint64_t, int64_t>& outputs,
                       const engine_model& engine) {
  for (auto& c : pending_) {
    if (c.step != step)
      continue;
    auto known = c.requests;
    bool whole = true;
    for (auto& r : known) {
      auto it = outputs.find(r.id);
      whole = whole && it != outputs.end();
      if (!whole)
        break;
      r.remaining = std::max<int64_t>(1, it->second - r.generated);
      r.expected = 0; // known: remaining is its expectation too
    }
    if (!whole)
      continue; // the step ended short of some request: nothing true to score against
    const double chosen =
      objective_of(engine, c.gpu_budget, c.chosen, c.current, known, c.params);
    const double other = objective_of(engine, c.gpu_budget, c.other, c.current, known, c.params);
    if (!std::isfinite(chosen) || !std::isfinite(other) || chosen <= 0)
      continue;
    // Only a gain the forecast overstated misleads a decision; one it understated cost nothing.
    errors_.push_back(std::max(0.0, c.predicted_gain_s - (other - chosen)) / chosen);
    if (errors_.size() > window_)
      errors_.erase(errors_.begin());
  }
  pending_.clear();
}

double plan_error::margin() const {
  if (errors_.empty())
    return 0;
  auto sorted = errors_;
  std::sort(sorted.begin(), sorted.end());
  const double at = quantile_ * double(sorted.size() - 1);
  const auto below = size_t(at);
  const double above = below + 1 < sorted.size() ? sorted[below + 1] : sorted[below];
  return sorted[below] + (at - double(below)) * (above - sorted[below]);
}

void plan_error::restore(std::vector<double> errors) {
  errors_ = std::move(errors);
  if (errors_.size() > window_)
    errors_.erase(errors_.begin(), errors_.end() - long(window_));
}

} // namespace loom
