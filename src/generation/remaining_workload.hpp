#pragma once
// What the planner believes about the requests of the current step (OrchestrRL §4.1): at the
// step's start the ARIMA forecast of the length histogram (or, with no history yet, every
// request at the maximum length); then the histogram corrected by each finish and by the
// progress of the slowest request; at the step's end the actual histogram is learned and the
// forecast scored. Pure.

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "generation/config_search.hpp"
#include "generation/forecast.hpp"
#include "generation/histogram.hpp"
#include "types/generation.hpp"

namespace loom {

class remaining_workload {
public:
  remaining_workload(int bin_tokens, int64_t max_tokens, size_t forecast_window);

  /// Folds a snapshot in: a new step seeds the histogram (its finished outputs count in the
  /// batch: a step first seen after a restart), the current one is corrected.
  void observe(const gen_snapshot& snapshot);

  /// The snapshot's pending requests with their conservative remaining tokens.
  std::vector<gen_request_state> estimate(const gen_snapshot& snapshot) const;

  /// The step ended with these output lengths: the forecaster learns them. Returns the
  /// forecast's relative error (histogram L1 over the batch, and of the mean length), or
  /// nothing if the step had no forecast (the first one).
  struct forecast_error {
    double histogram = 0;
    double mean_length = 0;
  };
  std::optional<forecast_error> end_step(uint64_t step, const std::vector<int64_t>& outputs);

  /// Whether the estimate rests on something: a learned step, or half of this step's batch
  /// finished. The first finishes are the shortest requests and say little of the rest.
  bool informed() const {
    return forecaster_.steps_observed() > 0 || 2 * finished_in_step_ >= batch_;
  }

  const remaining_histogram& histogram() const { return histogram_; }
  histogram_forecaster& forecaster() { return forecaster_; }
  const histogram_forecaster& forecaster() const { return forecaster_; }

private:
  remaining_histogram histogram_;
  histogram_forecaster forecaster_;
  bool in_step_ = false;
  size_t batch_ = 0;            // of the current step
  size_t finished_in_step_ = 0;
  uint64_t step_ = 0;
  std::map<uint64_t, std::vector<double>> forecasts_; // per step, until it ends
};

} // namespace loom
