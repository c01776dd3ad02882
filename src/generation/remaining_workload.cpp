#include "generation/remaining_workload.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom {

remaining_workload::remaining_workload(int bin_tokens, int64_t max_tokens,
                                       size_t forecast_window)
  : histogram_(bin_tokens, max_tokens), forecaster_(histogram_.bins(), forecast_window) {}

void remaining_workload::observe(const gen_snapshot& snap) {
  if (!in_step_ || snap.step != step_) {
    const auto batch = double(snap.pending.size() + snap.finished_outputs.size());
    auto counts = forecaster_.forecast(batch);
    if (forecaster_.steps_observed() == 0)
      counts.back() = batch;
    else
      forecasts_[snap.step] = counts;
    histogram_.assign(counts);
    step_ = snap.step;
    in_step_ = true;
    batch_ = size_t(batch);
    finished_in_step_ = 0;
  }
  finished_in_step_ += snap.finished_outputs.size();
  for (auto out : snap.finished_outputs)
    histogram_.on_finished(out);
  if (snap.pending.empty())
    return;
  int64_t least = std::numeric_limits<int64_t>::max();
  for (auto& p : snap.pending)
    least = std::min(least, p.generated);
  histogram_.on_progress(least);
}

std::vector<gen_request_state> remaining_workload::estimate(const gen_snapshot& snap) const {
  std::vector<int64_t> generated;
  generated.reserve(snap.pending.size());
  for (auto& p : snap.pending)
    generated.push_back(p.generated);
  auto remaining = histogram_.estimate_remaining(generated);
  auto expected = histogram_.expected_remaining(generated);
  std::vector<gen_request_state> out;
  out.reserve(snap.pending.size());
  for (size_t i = 0; i < snap.pending.size(); ++i) {
    auto& p = snap.pending[i];
    out.push_back(
      {p.id, p.prompt_tokens + p.generated, remaining[i], p.instance, expected[i], p.generated});
  }
  return out;
}

std::optional<remaining_workload::forecast_error>
remaining_workload::end_step(uint64_t step, const std::vector<int64_t>& outputs) {
  std::vector<double> actual(histogram_.bins(), 0.0);
  for (auto out : outputs)
    actual[histogram_.bin_of(out)] += 1;
  std::optional<forecast_error> error;
  if (auto it = forecasts_.find(step); it != forecasts_.end()) {
    // Mean lengths with every request at its bin's midpoint, the forecast's resolution.
    auto mean = [&](const std::vector<double>& counts) {
      double n = 0;
      double sum = 0;
      for (size_t b = 0; b < counts.size(); ++b) {
        n += counts[b];
        sum += counts[b] * (double(histogram_.upper_bound(b)) - histogram_.bin_tokens() / 2.0);
      }
      return n > 0 ? sum / n : 0.0;
    };
    const double actual_mean = mean(actual);
    error = forecast_error{histogram_relative_error(it->second, actual),
                           actual_mean > 0 ? std::abs(mean(it->second) - actual_mean) / actual_mean
                                           : 0.0};
    forecasts_.erase(it);
  }
  forecaster_.observe(actual);
  if (step == step_)
    in_step_ = false;
  return error;
}

} // namespace loom
