#pragma once
// Forecasting the next step's output-length histogram (OrchestrRL §4.1): one ARIMA(p, d, q)
// per histogram bin over the bin's cumulative share in recent steps, fitted by the Hannan-Rissanen
// two-stage regression (a long AR for the innovations, then OLS on lagged values and
// innovations). Pure and deterministic.

#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

namespace loom {

/// The default, ARIMA(1, 1, 0), follows drift without an MA term: with the few dozen steps a
/// window holds, fitted MA terms chase sampling noise (replay measured 0.20 relative error of
/// the mean length with (1, 1, 1), 0.04 with (1, 1, 0)).
struct arima_order {
  int p = 1;
  int d = 1;
  int q = 0;
};

class arima {
public:
  /// Fits the model; nothing if the series is too short for the order.
  static std::optional<arima> fit(const std::vector<double>& series, arima_order order);

  /// The one-step-ahead forecast of the original (undifferenced) series.
  double forecast() const { return next_; }

  double constant() const { return c_; }
  const std::vector<double>& ar() const { return phi_; }
  const std::vector<double>& ma() const { return theta_; }

private:
  double c_ = 0;
  std::vector<double> phi_;
  std::vector<double> theta_;
  double next_ = 0;
};

/// Per-bin ARIMA forecasts of the histogram of output lengths, from a sliding window of steps.
class histogram_forecaster {
public:
  histogram_forecaster(size_t bins, size_t window = 32, arima_order order = {});

  /// Records the final histogram (request counts per bin) of a finished step.
  void observe(const std::vector<double>& counts);

  /// Forecast counts per bin for a step of `batch` requests: each bin's cumulative share
  /// forecast by ARIMA (the last one while the history is too short), kept a valid CDF, and
  /// scaled to `batch`.
  std::vector<double> forecast(double batch) const;

  size_t steps_observed() const { return history_.size(); }

  /// The window of observed steps' shares, oldest first; restore() takes it back (a restart).
  std::vector<std::vector<double>> history() const { return {history_.begin(), history_.end()}; }
  void restore(const std::vector<std::vector<double>>& history);

private:
  size_t bins_;
  size_t window_;
  arima_order order_;
  std::deque<std::vector<double>> history_; // per-step shares
};

/// Relative error of a histogram forecast: sum |forecast - actual| / sum actual.
double histogram_relative_error(const std::vector<double>& forecast,
                                const std::vector<double>& actual);

} // namespace loom
