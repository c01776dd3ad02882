#pragma once
// mFabric's all-to-all traffic monitor and demand prediction (§5.1, App. B), pure.
//
// A MoE layer's four all-to-alls share one matrix, known once its gating ran; the first one
// of a layer must be planned before that. App. B predicts a layer's dispatch load (tokens per
// destination rank, normalised) from the previous layer's in the same iteration through a
// transition matrix P, P[j][i] being the share of the tokens at i in layer l-1 that go to j in
// layer l: column-stochastic, fit per layer by weighted least squares over a window of recent
// iterations, newer ones weighing more (Eq. 1). The paper solves it with SLSQP; this does
// projected gradient descent (each column projected onto the probability simplex), warm
// started from the last fit, which reaches the same constrained optimum.

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace loom {

/// The closest point of the probability simplex (Euclidean projection).
std::vector<double> project_to_simplex(std::vector<double> v);

/// App. B Eq. 1: argmin over column-stochastic n x n P (row-major, P[j * n + i]) of
/// sum_k w[k] ||y[k] - P x[k]||^2, starting from `start` (empty: uniform columns).
std::vector<double> fit_transition(const std::vector<std::vector<double>>& x,
                                   const std::vector<std::vector<double>>& y,
                                   const std::vector<double>& w, size_t n,
                                   std::vector<double> start = {}, int iterations = 300);

/// `tokens` scaled to sum to one (all zero: uniform).
std::vector<double> normalised(const std::vector<double>& tokens);

class traffic_monitor {
public:
  /// `window`: iterations a fit looks back over; `decay`: each older one's weight factor.
  explicit traffic_monitor(size_t window = 8, double decay = 0.8)
      : window_(window), decay_(decay) {}

  /// One layer's dispatch load in one iteration: tokens per destination rank. A report of
  /// another width than the layer's earlier ones starts that layer's history afresh.
  void record(uint64_t iteration, uint32_t layer, std::vector<double> tokens);

  /// The normalised load a layer had in an iteration, if it was reported.
  std::optional<std::vector<double>> observed(uint64_t iteration, uint32_t layer) const;

  /// App. B: the predicted normalised load of `layer` in `iteration`, from `layer - 1`'s in
  /// that iteration and the transition learnt over the window before it; nothing when the
  /// previous layer is not reported yet or no earlier iteration reported both layers.
  std::optional<std::vector<double>> predict(uint64_t iteration, uint32_t layer);

private:
  size_t window_;
  double decay_;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<double>> loads_; // (layer, iteration)
  std::map<uint32_t, std::vector<double>> fits_;                        // warm starts per layer
};

} // namespace loom
