#include "replay/fabric_moe.hpp"

#include <cmath>
#include <numeric>
#include <random>

#include "fabric/circuit_plan.hpp"
#include "fabric/flow_model.hpp"
#include "fabric/stage_template.hpp"
#include "fabric/traffic_monitor.hpp"

namespace loom::replay {

namespace {

/// A column-stochastic n x n transition (row-major): each expert's tokens go mostly to a few
/// next ones, more so the sharper.
std::vector<double> random_transition(size_t n, double sharpness, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u{0, 1};
  std::vector<double> p(n * n);
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (size_t j = 0; j < n; ++j)
      sum += p[j * n + i] = std::pow(u(rng), sharpness);
    for (size_t j = 0; j < n; ++j)
      p[j * n + i] /= sum;
  }
  return p;
}

/// `tokens` dispatched by the distribution `y`: one multinomial draw (sequential binomials).
std::vector<double> dispatch(const std::vector<double>& y, double tokens, std::mt19937_64& rng) {
  std::vector<double> out(y.size(), 0);
  double left = tokens, mass = 1;
  for (size_t i = 0; i < y.size() && left > 0; ++i) {
    double p = mass > 0 ? std::clamp(y[i] / mass, 0.0, 1.0) : 0;
    out[i] = double(std::binomial_distribution<int64_t>{int64_t(left), p}(rng));
    left -= out[i];
    mass -= y[i];
  }
  return out;
}

double l1(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d += std::abs(a[i] - b[i]);
  return d;
}

/// The region, its ranks, and the first all-to-all of a layer planned and timed.
class region_bench {
public:
  explicit region_bench(const moe_setup& s)
      : setup_(s), shaped_(make_mfabric_region(s.region)),
        model_(*fabric_model::build(shaped_.config, shaped_.nodes).value) {
    for (uint32_t sv = 0; sv < uint32_t(s.region.servers); ++sv)
      for (int g = 0; g < s.region.gpus_per_server; ++g)
        ranks_.push_back({sv, g});
  }

  size_t ranks() const { return ranks_.size(); }

  /// The all-to-all of a layer whose dispatch is `truth`, on the circuits mFabric Alg. 1
  /// plans for `planned` (both per rank), timed on the server-level demand it makes.
  double time(const std::vector<double>& planned, const std::vector<double>& truth) {
    auto plan = materialize_intent(model_, template_for(), intent(planned), port_usage{model_},
                                   nullptr);
    if (!plan.plan)
      return std::numeric_limits<double>::infinity();
    std::vector<rank_flow> flows;
    for (auto& d : server_demand(model_, 0, intent_flows(intent(truth))))
      flows.push_back({{d.from, 0}, {d.to, 0}, d.bytes});
    return fabric_network(model_, plan.plan->layout).completion_s(flows);
  }

private:
  fabric_intent intent(const std::vector<double>& weights) const {
    fabric_intent i{"moe", fabric_stage::train_compute, {{primitive::all_to_all, 1.0}}, ranks_,
                    setup_.gb_per_rank * 1e9};
    i.receive_weights = weights;
    return i;
  }

  const stage_template& template_for() {
    if (!template_)
      template_ = select_template(model_, intent({}));
    return *template_;
  }

  const moe_setup& setup_;
  shaped_fabric shaped_;
  fabric_model model_;
  std::vector<rank_ref> ranks_;
  std::optional<stage_template> template_;
};

} // namespace

moe_result simulate_moe(const moe_setup& s, uint64_t seed) {
  std::mt19937_64 rng{seed};
  region_bench region{s};
  const size_t n = region.ranks();
  // Each layer's transition drifts from one matrix to another over the run.
  std::vector<std::vector<double>> from, to;
  for (int l = 0; l < s.layers; ++l) {
    from.push_back(random_transition(n, s.transition_sharpness, rng));
    to.push_back(random_transition(n, s.transition_sharpness, rng));
  }
  std::normal_distribution<double> start{0, s.skew}, walk{0, s.popularity_drift};
  std::vector<double> log_popularity(n);
  for (auto& w : log_popularity)
    w = start(rng);
  traffic_monitor monitor{size_t(s.window), s.decay};
  const std::vector<double> uniform(n, 1.0 / double(n));
  moe_result r;
  for (int it = 0; it < s.iterations; ++it) {
    const double mix = s.iterations > 1 ? double(it) / (s.iterations - 1) : 0;
    std::vector<double> y(n);
    for (size_t i = 0; i < n; ++i)
      y[i] = std::exp(log_popularity[i]);
    auto load = dispatch(normalised(y), s.tokens, rng);
    monitor.record(uint64_t(it), 0, load);
    for (int l = 1; l < s.layers; ++l) {
      auto prev = normalised(load);
      std::vector<double> next(n, 0);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < n; ++i)
          next[j] += ((1 - mix) * from[size_t(l)][j * n + i] + mix * to[size_t(l)][j * n + i])
                     * prev[i];
      load = dispatch(next, s.tokens, rng);
      auto truth = normalised(load);
      auto predicted = monitor.predict(uint64_t(it), uint32_t(l));
      r.predictions += predicted.has_value();
      auto guess = predicted ? *predicted : prev;
      r.prediction_error += l1(guess, truth);
      r.unchanged_error += l1(prev, truth);
      r.perfect_s += region.time(truth, truth);
      r.predicted_s += region.time(guess, truth);
      r.unchanged_s += region.time(prev, truth);
      r.static_s += region.time(uniform, truth);
      ++r.planned;
      monitor.record(uint64_t(it), uint32_t(l), load);
    }
    for (auto& w : log_popularity)
      w += walk(rng);
  }
  if (r.planned > 0) {
    r.prediction_error /= r.planned;
    r.unchanged_error /= r.planned;
  }
  return r;
}

} // namespace loom::replay
