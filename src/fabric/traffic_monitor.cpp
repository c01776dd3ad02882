#include "fabric/traffic_monitor.hpp"

#include <algorithm>
#include <numeric>

namespace loom {

std::vector<double> project_to_simplex(std::vector<double> v) {
  // Duchi et al. (2008): the largest k with u_k > (sum of the k largest - 1) / k sets the
  // threshold every entry is lowered by.
  if (v.empty())
    return v;
  auto u = v;
  std::sort(u.begin(), u.end(), std::greater<>{});
  double sum = 0, theta = 0;
  for (size_t k = 0; k < u.size(); ++k) {
    sum += u[k];
    double t = (sum - 1) / double(k + 1);
    if (u[k] > t)
      theta = t;
  }
  for (auto& x : v)
    x = std::max(0.0, x - theta);
  return v;
}

std::vector<double> normalised(const std::vector<double>& tokens) {
  double total = std::accumulate(tokens.begin(), tokens.end(), 0.0);
  std::vector<double> out(tokens.size(), tokens.empty() ? 0.0 : 1.0 / double(tokens.size()));
  if (total > 0)
    for (size_t i = 0; i < tokens.size(); ++i)
      out[i] = std::max(0.0, tokens[i]) / total;
  return out;
}

std::vector<double> fit_transition(const std::vector<std::vector<double>>& x,
                                   const std::vector<std::vector<double>>& y,
                                   const std::vector<double>& w, size_t n,
                                   std::vector<double> start, int iterations) {
  auto p = start.size() == n * n ? std::move(start) : std::vector<double>(n * n, 1.0 / double(n));
  // The gradient's Lipschitz constant is at most 2 sum_k w_k |x_k|^2: a step of its inverse
  // never increases the objective.
  double lipschitz = 0;
  for (size_t k = 0; k < x.size(); ++k)
    lipschitz += 2 * w[k] * std::inner_product(x[k].begin(), x[k].end(), x[k].begin(), 0.0);
  if (lipschitz <= 0)
    return p;
  const double step = 1 / lipschitz;
  std::vector<double> grad(n * n), residual(n), column(n);
  for (int it = 0; it < iterations; ++it) {
    std::fill(grad.begin(), grad.end(), 0.0);
    for (size_t k = 0; k < x.size(); ++k) {
      for (size_t j = 0; j < n; ++j) {
        double px = 0;
        for (size_t i = 0; i < n; ++i)
          px += p[j * n + i] * x[k][i];
        residual[j] = px - y[k][j];
      }
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < n; ++i)
          grad[j * n + i] += 2 * w[k] * residual[j] * x[k][i];
    }
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j)
        column[j] = p[j * n + i] - step * grad[j * n + i];
      column = project_to_simplex(std::move(column));
      for (size_t j = 0; j < n; ++j)
        p[j * n + i] = column[j];
    }
  }
  return p;
}

void traffic_monitor::record(uint64_t iteration, uint32_t layer, std::vector<double> tokens) {
  if (auto it = loads_.lower_bound({layer, 0});
      it != loads_.end() && it->first.first == layer && it->second.size() != tokens.size()) {
    loads_.erase(it, loads_.lower_bound({layer + 1, 0}));
    fits_.erase(layer);
    fits_.erase(layer + 1);
  }
  loads_[{layer, iteration}] = normalised(tokens);
  // Keep what a fit can still look back on.
  while (true) {
    auto first = loads_.lower_bound({layer, 0});
    if (first == loads_.end() || first->first.first != layer
        || first->first.second + window_ + 1 >= iteration)
      break;
    loads_.erase(first);
  }
}

std::optional<std::vector<double>> traffic_monitor::observed(uint64_t iteration,
                                                             uint32_t layer) const {
  auto it = loads_.find({layer, iteration});
  if (it == loads_.end())
    return std::nullopt;
  return it->second;
}

std::optional<std::vector<double>> traffic_monitor::predict(uint64_t iteration, uint32_t layer) {
  if (layer == 0)
    return std::nullopt;
  auto now = observed(iteration, layer - 1);
  if (!now)
    return std::nullopt;
  const size_t n = now->size();
  std::vector<std::vector<double>> x, y;
  std::vector<double> w;
  double weight = 1;
  for (uint64_t back = 1; back <= window_ && back <= iteration; ++back, weight *= decay_) {
    auto prev = observed(iteration - back, layer - 1);
    auto next = observed(iteration - back, layer);
    if (!prev || !next || prev->size() != n || next->size() != n)
      continue;
    x.push_back(std::move(*prev));
    y.push_back(std::move(*next));
    w.push_back(weight);
  }
  if (x.empty())
    return std::nullopt;
  auto& p = fits_[layer];
  p = fit_transition(x, y, w, n, std::move(p));
  std::vector<double> out(n, 0.0);
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < n; ++i)
      out[j] += p[j * n + i] * (*now)[i];
  return out;
}

} // namespace loom
