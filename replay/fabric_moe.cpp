#include "replay/fabric_moe.hpp"

#include <algorithm>
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

/// App. B's own model: the first layer's log-popularity walks; each later layer's load is the
/// previous one's through a transition drifting linearly from one matrix to another.
class markov_traffic {
public:
  markov_traffic(const moe_setup& s, size_t n, std::mt19937_64& rng) : s_(s), n_(n), rng_(rng) {
    for (int l = 0; l < s.layers; ++l) {
      from_.push_back(random_transition(n, s.transition_sharpness, rng));
      to_.push_back(random_transition(n, s.transition_sharpness, rng));
    }
    std::normal_distribution<double> start{0, s.skew};
    log_popularity_.resize(n);
    for (auto& w : log_popularity_)
      w = start(rng);
  }

  void start_iteration(int it) {
    if (it > 0) {
      std::normal_distribution<double> walk{0, s_.popularity_drift};
      for (auto& w : log_popularity_)
        w += walk(rng_);
    }
    mix_ = s_.iterations > 1 ? double(it) / (s_.iterations - 1) : 0;
  }

  bool bursting() const { return false; }

  std::vector<double> first() const {
    std::vector<double> y(n_);
    for (size_t i = 0; i < n_; ++i)
      y[i] = std::exp(log_popularity_[i]);
    return normalised(y);
  }

  std::vector<double> next(int l, const std::vector<double>& prev) const {
    auto& a = from_[size_t(l)];
    auto& b = to_[size_t(l)];
    std::vector<double> out(n_, 0);
    for (size_t j = 0; j < n_; ++j)
      for (size_t i = 0; i < n_; ++i)
        out[j] += ((1 - mix_) * a[j * n_ + i] + mix_ * b[j * n_ + i]) * prev[i];
    return out;
  }

private:
  const moe_setup& s_;
  size_t n_;
  std::mt19937_64& rng_;
  std::vector<std::vector<double>> from_, to_;
  std::vector<double> log_popularity_;
  double mix_ = 0;
};

/// What the predictor does not model: per-layer Zipf popularity over a reshuffling order, a
/// fixed affinity for the rest of the tokens, a capacity cap, and bursts of one hot expert.
class zipf_burst_traffic {
public:
  zipf_burst_traffic(const moe_setup& s, size_t n, std::mt19937_64& rng)
      : s_(s), n_(n), rng_(rng), order_(size_t(s.layers)), affinity_(size_t(s.layers)),
        hot_(size_t(s.layers), 0) {
    for (int l = 0; l < s.layers; ++l) {
      for (auto* v : {&order_[size_t(l)], &affinity_[size_t(l)]}) {
        v->resize(n);
        std::iota(v->begin(), v->end(), size_t{0});
        std::shuffle(v->begin(), v->end(), rng);
      }
    }
  }

  void start_iteration(int it) {
    std::uniform_int_distribution<size_t> pick{0, n_ - 1};
    if (it > 0)
      for (auto& order : order_)
        for (int k = 0; k < s_.popularity_swaps && n_ > 1; ++k) {
          size_t r = std::uniform_int_distribution<size_t>{0, n_ - 2}(rng_);
          std::swap(order[r], order[r + 1]);
        }
    if (burst_left_ > 0) {
      --burst_left_;
    } else if (std::uniform_real_distribution<double>{0, 1}(rng_) < s_.burst_rate) {
      burst_left_ = s_.burst_iterations;
      for (auto& h : hot_)
        h = pick(rng_);
    }
  }

  bool bursting() const { return burst_left_ > 0; }

  std::vector<double> first() const { return shaped(0, zipf(0)); }

  std::vector<double> next(int l, const std::vector<double>& prev) const {
    auto own = zipf(l);
    std::vector<double> d(n_);
    for (size_t i = 0; i < n_; ++i)
      d[i] = (1 - s_.affinity) * own[i];
    for (size_t i = 0; i < n_; ++i)
      d[affinity_[size_t(l)][i]] += s_.affinity * prev[i];
    return shaped(l, d);
  }

private:
  std::vector<double> zipf(int l) const {
    std::vector<double> z(n_);
    for (size_t r = 0; r < n_; ++r)
      z[order_[size_t(l)][r]] = std::pow(double(r + 1), -s_.zipf_exponent);
    return normalised(z);
  }

  /// The burst's hot expert, then the capacity cap: what overflows goes to the experts with
  /// room, in proportion to their load, until none is over (water-filling).
  std::vector<double> shaped(int l, std::vector<double> d) const {
    if (bursting())
      d[hot_[size_t(l)]] *= s_.burst_factor;
    d = normalised(d);
    const double cap = s_.capacity_factor / double(n_);
    for (size_t round = 0; round < n_; ++round) {
      double excess = 0, room = 0;
      for (auto& v : d)
        if (v > cap) {
          excess += v - cap;
          v = cap;
        } else {
          room += v;
        }
      if (excess <= 1e-12 || room <= 0)
        break;
      for (auto& v : d)
        if (v < cap)
          v += excess * v / room;
    }
    return d;
  }

  const moe_setup& s_;
  size_t n_;
  std::mt19937_64& rng_;
  std::vector<std::vector<size_t>> order_;    // per layer: experts by popularity rank
  std::vector<std::vector<size_t>> affinity_; // per layer: expert i's tokens go to affinity[i]
  std::vector<size_t> hot_;
  int burst_left_ = 0;
};

void add(moe_times& t, double pred_err, double unch_err, double perfect, double predicted,
         double unchanged, double fixed) {
  ++t.planned;
  t.prediction_error += pred_err;
  t.unchanged_error += unch_err;
  t.perfect_s += perfect;
  t.predicted_s += predicted;
  t.unchanged_s += unchanged;
  t.static_s += fixed;
}

void finish(moe_times& t) {
  if (t.planned > 0) {
    t.prediction_error /= t.planned;
    t.unchanged_error /= t.planned;
  }
}

/// Every iteration's loads from `traffic`, forecast by the traffic monitor and timed on each
/// plan.
template <class Traffic>
moe_result run(const moe_setup& s, region_bench& region, Traffic& traffic, std::mt19937_64& rng) {
  const size_t n = region.ranks();
  traffic_monitor monitor{size_t(s.window), s.decay};
  const std::vector<double> uniform(n, 1.0 / double(n));
  moe_result r;
  for (int it = 0; it < s.iterations; ++it) {
    traffic.start_iteration(it);
    auto load = dispatch(traffic.first(), s.tokens, rng);
    monitor.record(uint64_t(it), 0, load);
    for (int l = 1; l < s.layers; ++l) {
      auto prev = normalised(load);
      load = dispatch(traffic.next(l, prev), s.tokens, rng);
      auto truth = normalised(load);
      auto predicted = monitor.predict(uint64_t(it), uint32_t(l));
      r.predictions += predicted.has_value();
      auto guess = predicted ? *predicted : prev;
      double times[4] = {region.time(truth, truth), region.time(guess, truth),
                         region.time(prev, truth), region.time(uniform, truth)};
      for (auto* t : {&r.all, traffic.bursting() ? &r.burst : &r.steady})
        add(*t, l1(guess, truth), l1(prev, truth), times[0], times[1], times[2], times[3]);
      monitor.record(uint64_t(it), uint32_t(l), load);
    }
  }
  for (auto* t : {&r.all, &r.steady, &r.burst})
    finish(*t);
  return r;
}

} // namespace

moe_result simulate_moe(const moe_setup& s, uint64_t seed) {
  std::mt19937_64 rng{seed};
  region_bench region{s};
  if (s.traffic == moe_traffic::zipf_bursts) {
    zipf_burst_traffic traffic{s, region.ranks(), rng};
    return run(s, region, traffic, rng);
  }
  markov_traffic traffic{s, region.ranks(), rng};
  return run(s, region, traffic, rng);
}

} // namespace loom::replay
