#include "generation/forecast.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace loom {

namespace {

/// Ordinary least squares y ~ X (rows of regressors) via the normal equations, with a tiny
/// ridge so that collinear regressors (e.g. a constant series) stay solvable.
std::optional<std::vector<double>> least_squares(const std::vector<std::vector<double>>& x,
                                                 const std::vector<double>& y) {
  if (x.empty())
    return std::nullopt;
  const size_t k = x.front().size();
  std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0.0));
  for (size_t r = 0; r < x.size(); ++r)
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j)
        a[i][j] += x[r][i] * x[r][j];
      a[i][k] += x[r][i] * y[r];
    }
  for (size_t i = 0; i < k; ++i)
    a[i][i] += 1e-9 * (1.0 + a[i][i]);
  for (size_t col = 0; col < k; ++col) { // Gaussian elimination, partial pivoting
    size_t pivot = col;
    for (size_t r = col + 1; r < k; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col]))
        pivot = r;
    if (std::abs(a[pivot][col]) < 1e-300)
      return std::nullopt;
    std::swap(a[col], a[pivot]);
    for (size_t r = 0; r < k; ++r) {
      if (r == col)
        continue;
      double f = a[r][col] / a[col][col];
      for (size_t c = col; c <= k; ++c)
        a[r][c] -= f * a[col][c];
    }
  }
  std::vector<double> beta(k);
  for (size_t i = 0; i < k; ++i)
    beta[i] = a[i][k] / a[i][i];
  return beta;
}

/// The regressors of y_t: 1, y_{t-1..t-p}, e_{t-1..t-q}. Valid for t up to y.size() (the
/// forecast origin).
std::vector<double> regressors(const std::vector<double>& y, const std::vector<double>& e,
                               size_t t, int p, int q) {
  std::vector<double> row{1.0};
  for (int i = 1; i <= p; ++i)
    row.push_back(y[t - static_cast<size_t>(i)]);
  for (int j = 1; j <= q; ++j)
    row.push_back(e[t - static_cast<size_t>(j)]);
  return row;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

std::vector<double> difference(std::vector<double> s, int d) {
  for (int i = 0; i < d; ++i) {
    std::vector<double> next;
    for (size_t t = 1; t < s.size(); ++t)
      next.push_back(s[t] - s[t - 1]);
    s = std::move(next);
  }
  return s;
}

} // namespace

std::optional<arima> arima::fit(const std::vector<double>& series, arima_order order) {
  auto y = difference(series, order.d);
  const int p = order.p;
  const int q = order.q;
  // Stage 1: a long autoregression estimates the innovations (only needed with MA terms).
  const int m = q > 0 ? std::max(p + q, std::min(8, static_cast<int>(y.size()) / 3)) : 0;
  const int start = std::max(p, m + q);
  if (static_cast<int>(y.size()) - start < 1 + p + q + 1)
    return std::nullopt;
  std::vector<double> innov(y.size(), 0.0);
  if (q > 0) {
    std::vector<std::vector<double>> x;
    std::vector<double> target;
    for (size_t t = static_cast<size_t>(m); t < y.size(); ++t) {
      x.push_back(regressors(y, innov, t, m, 0));
      target.push_back(y[t]);
    }
    auto beta = least_squares(x, target);
    if (!beta)
      return std::nullopt;
    for (size_t t = static_cast<size_t>(m); t < y.size(); ++t)
      innov[t] = y[t] - dot(*beta, regressors(y, innov, t, m, 0));
  }
  // Stage 2: y_t = c + sum phi_i y_{t-i} + sum theta_j e_{t-j} + e_t.
  std::vector<std::vector<double>> x;
  std::vector<double> target;
  for (size_t t = static_cast<size_t>(start); t < y.size(); ++t) {
    x.push_back(regressors(y, innov, t, p, q));
    target.push_back(y[t]);
  }
  auto beta = least_squares(x, target);
  if (!beta)
    return std::nullopt;
  arima model;
  model.c_ = (*beta)[0];
  model.phi_.assign(beta->begin() + 1, beta->begin() + 1 + p);
  model.theta_.assign(beta->begin() + 1 + p, beta->end());
  // Residuals of the fitted model, then the next differenced value.
  std::vector<double> resid(y.size(), 0.0);
  for (size_t t = static_cast<size_t>(start); t < y.size(); ++t)
    resid[t] = y[t] - dot(*beta, regressors(y, resid, t, p, q));
  double next = dot(*beta, regressors(y, resid, y.size(), p, q));
  // Undo the differencing: add back the last value of each differenced level.
  for (int level = order.d - 1; level >= 0; --level)
    next += difference(series, level).back();
  model.next_ = next;
  return model;
}

histogram_forecaster::histogram_forecaster(size_t bins, size_t window, arima_order order)
  : bins_(bins), window_(window), order_(order) {}

void histogram_forecaster::observe(const std::vector<double>& counts) {
  double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  std::vector<double> shares(bins_, 0.0);
  for (size_t b = 0; b < bins_ && b < counts.size(); ++b)
    shares[b] = total > 0 ? counts[b] / total : 0.0;
  history_.push_back(std::move(shares));
  if (history_.size() > window_)
    history_.pop_front();
}

void histogram_forecaster::restore(const std::vector<std::vector<double>>& history) {
  history_.clear();
  for (auto& shares : history) {
    if (shares.size() != bins_)
      continue; // another bin layout: it says nothing about this one
    history_.push_back(shares);
    if (history_.size() > window_)
      history_.pop_front();
  }
}

std::vector<double> histogram_forecaster::forecast(double batch) const {
  std::vector<double> out(bins_, 0.0);
  if (history_.empty())
    return out;
  // Each bin's cumulative share (the CDF at its upper bound) is modelled rather than its own
  // share: a sum over bins carries far less sampling noise than one sparse bin, which keeps
  // short, noisy histories from being extrapolated wildly. The forecast CDF is clipped to
  // [0, 1] and made monotone before it is turned back into bins.
  std::vector<double> cdf(bins_, 0.0);
  double level = 0;
  for (size_t b = 0; b < bins_; ++b) {
    std::vector<double> series;
    for (auto& step : history_)
      series.push_back(std::accumulate(step.begin(), step.begin() + long(b) + 1, 0.0));
    auto model = arima::fit(series, order_);
    level = std::max(level, std::clamp(model ? model->forecast() : series.back(), 0.0, 1.0));
    cdf[b] = level;
  }
  double total = cdf.back();
  for (size_t b = 0; b < bins_; ++b) {
    double share = cdf[b] - (b > 0 ? cdf[b - 1] : 0.0);
    out[b] = total > 0 ? share / total * batch : 0.0;
  }
  return out;
}

double histogram_relative_error(const std::vector<double>& forecast,
                                const std::vector<double>& actual) {
  double err = 0;
  double total = 0;
  for (size_t b = 0; b < actual.size(); ++b) {
    err += std::abs((b < forecast.size() ? forecast[b] : 0.0) - actual[b]);
    total += actual[b];
  }
  return total > 0 ? err / total : 0.0;
}

} // namespace loom
