#pragma once
// How far the forecast misleads the planner's comparisons: the margin a switch must beat
// (OrchestrRL §4.1's epsilon, measured instead of assumed). A decision compares the deployment
// it chose with another (staying, for a switch; the runner-up, on a new batch) on forecast
// lengths. Once the step has ended every length is known, and the same two are scored again,
// by the same cost model, on the true remaining lengths of the decision's requests. The error
// of the predicted gain over what the true lengths give, relative to the chosen deployment's
// true objective, averaged over the last steps' decisions, is the margin; a gain it understated
// counts as none. It measures the forecast's error where it matters (in the difference two
// configs make), not in the makespan, whose error both candidates share. Pure.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "generation/config_search.hpp"
#include "generation/engine_model.hpp"
#include "types/generation.hpp"

namespace loom {

/// One comparison a decision made on forecast lengths.
struct plan_choice {
  uint64_t step = 0;
  int gpu_budget = 0;
  gen_deployment current;  // what ran when it was made
  gen_deployment chosen;
  gen_deployment other;    // what it was preferred to
  double predicted_gain_s = 0; // objective of `other` minus that of `chosen`, forecast lengths
  std::vector<gen_request_state> requests; // as the decision saw them (progress, placement)
  planner_params params;                   // as it scored candidates
};

class plan_error {
public:
  explicit plan_error(size_t window = 32, size_t per_step = 8, double quantile = 0.75)
    : window_(window), per_step_(per_step), quantile_(quantile) {}

  /// Keeps a decision's comparison until its step ends (at most per_step a step).
  void decided(plan_choice c);

  /// The step ended with these output lengths: scores its decisions' comparisons again on the
  /// true remaining lengths, as each decision scored its candidates.
  void ended(uint64_t step, const std::unordered_map<uint64_t, int64_t>& outputs,
             const engine_model& engine);

  /// The `quantile` of the recent relative gain errors (most of them, not one outlier); 0
  /// before any was measured.
  double margin() const;

  /// The recent relative errors, oldest first (what the store keeps).
  const std::vector<double>& errors() const { return errors_; }
  void restore(std::vector<double> errors);

private:
  size_t window_;
  size_t per_step_;
  double quantile_;
  std::vector<plan_choice> pending_;
  std::vector<double> errors_;
};

} // namespace loom
