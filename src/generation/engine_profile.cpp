#include "generation/engine_profile.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace loom {

const profiled_config* engine_profile::find(const parallel_config& c) const {
  auto it = std::find_if(configs.begin(), configs.end(),
                         [&](const profiled_config& p) { return p.parallel == c; });
  return it == configs.end() ? nullptr : &*it;
}

namespace {

/// Solves the normal equations of the columns `use` (a subset of 1, B, C/1000) by Gaussian
/// elimination; nothing if they are singular.
std::optional<std::array<double, 3>> least_squares(const std::vector<step_sample>& s,
                                                   const std::array<bool, 3>& use) {
  std::array<std::array<double, 4>, 3> m{};
  auto row = [](const step_sample& x) {
    return std::array<double, 3>{1.0, x.batch, x.context_tokens / 1000};
  };
  for (auto& x : s) {
    auto r = row(x);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < 3; ++j)
        m[i][j] += r[i] * r[j];
    for (size_t i = 0; i < 3; ++i)
      m[i][3] += r[i] * x.step_ms;
  }
  for (size_t i = 0; i < 3; ++i)
    if (!use[i]) { // a dropped column: its coefficient pinned at 0
      m[i] = {0, 0, 0, 0};
      m[i][i] = 1;
      for (size_t k = 0; k < 3; ++k)
        if (k != i)
          m[k][i] = 0;
    }
  for (size_t c = 0; c < 3; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < 3; ++r)
      if (std::abs(m[r][c]) > std::abs(m[pivot][c]))
        pivot = r;
    if (std::abs(m[pivot][c]) < 1e-12 * (1 + std::abs(m[c][c])))
      return std::nullopt;
    std::swap(m[c], m[pivot]);
    for (size_t r = 0; r < 3; ++r)
      if (r != c) {
        const double f = m[r][c] / m[c][c];
        for (size_t k = c; k < 4; ++k)
          m[r][k] -= f * m[c][k];
      }
  }
  return std::array<double, 3>{m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]};
}

} // namespace

std::optional<step_line> fit_step_line(const std::vector<step_sample>& samples) {
  // The full fit must be determined: with batch and context moving together a subset fit
  // would hide that the samples cannot separate their costs.
  if (samples.size() < 3 || !least_squares(samples, {true, true, true}))
    return std::nullopt;
  // Non-negative least squares over three columns: the best of the fits on every subset of
  // columns whose coefficients all come out non-negative.
  std::optional<step_line> best;
  double best_error = 0;
  for (int mask = 1; mask < 8; ++mask) {
    const std::array<bool, 3> use{bool(mask & 1), bool(mask & 2), bool(mask & 4)};
    auto x = least_squares(samples, use);
    if (!x || (*x)[0] < 0 || (*x)[1] < 0 || (*x)[2] < 0)
      continue;
    double error = 0;
    for (auto& s : samples) {
      const double d = (*x)[0] + (*x)[1] * s.batch + (*x)[2] * s.context_tokens / 1000 - s.step_ms;
      error += d * d;
    }
    if (!best || error < best_error) {
      best = step_line{(*x)[0], (*x)[1], (*x)[2]};
      best_error = error;
    }
  }
  return best;
}

} // namespace loom
