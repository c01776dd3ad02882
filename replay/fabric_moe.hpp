#pragma once
// mFabric's traffic side on the virtual clock (§5.1, App. B): a MoE job's expert popularity
// drifts over iterations, and every layer's first all-to-all must be planned on the regional
// OCS before its gating runs. The traffic monitor the fabric controller runs live
// (traffic_monitor) sees every layer's load as the shims would report it and predicts the next
// one. The first all-to-all of layers 1.. is then planned by mFabric Alg. 1
// (materialize_intent) from the prediction, from perfect knowledge, from the previous layer's
// load ("unchanged topology") and from a uniform split ("static"), and the true all-to-all is
// timed on each plan by the flow model.
//
// Two traffic sources. `markov`: each layer's load follows the previous layer's through a
// transition that itself drifts, the very model App. B's predictor fits. `zipf_bursts`, which
// it does not fit: each layer's own Zipf popularity over a slowly reshuffled expert order,
// mixed with tokens that follow a fixed expert-to-expert affinity, capped per expert (routing
// capacity: what overflows goes to the experts with room, a non-linear map), and bursts: from
// time to time one expert per layer turns hot for a few iterations (a change of data domain).

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "fabric/shape.hpp"
#include "types/names.hpp"

namespace loom::replay {

enum class moe_traffic : uint8_t { markov, zipf_bursts };

} // namespace loom::replay

namespace loom {

template <>
struct enum_names<replay::moe_traffic> {
  static constexpr std::array<std::pair<replay::moe_traffic, std::string_view>, 2> table{{
    {replay::moe_traffic::markov, "markov"},
    {replay::moe_traffic::zipf_bursts, "zipf-bursts"},
  }};
};

} // namespace loom

namespace loom::replay {

struct moe_setup {
  moe_traffic traffic = moe_traffic::markov;
  mfabric_shape region;
  int layers = 8;
  int iterations = 40;
  int window = 8;          // App. B's fit window, iterations
  double decay = 0.8;      // each older iteration's weight in the fit
  double tokens = 65536;   // dispatched per layer
  double gb_per_rank = 0.5;
  double popularity_drift = 0.05; // sigma of the first layer's log-popularity walk, per iteration
  double skew = 1.0;       // the first layer's popularity: log-normal sigma
  double transition_sharpness = 3; // higher: each expert's tokens go to fewer next experts
  // zipf_bursts
  double zipf_exponent = 0.8;    // a layer's own popularity: 1 / rank^s
  double affinity = 0.5;         // share of tokens that follow the expert-to-expert affinity
  double capacity_factor = 4;    // no expert takes more than this times the mean load
  int popularity_swaps = 2;      // adjacent swaps in each layer's popularity order, per iteration
  double burst_rate = 0.1;       // chance a burst starts in an iteration without one
  int burst_iterations = 3;
  double burst_factor = 10;      // the hot expert's popularity multiplier
};

/// Plans timed over a class of iterations.
struct moe_times {
  int planned = 0;
  double prediction_error = 0; // mean L1 distance of the prediction from the true load
  double unchanged_error = 0;  // the previous layer's load as the guess
  double perfect_s = 0;        // total first-all-to-all time on each plan
  double predicted_s = 0;
  double unchanged_s = 0;
  double static_s = 0;
};

struct moe_result {
  moe_times all;
  moe_times steady; // iterations without a burst
  moe_times burst;  // iterations with one (zipf_bursts)
  int predictions = 0; // how many had a prediction (the rest fell back to unchanged)
};

moe_result simulate_moe(const moe_setup& setup, uint64_t seed);

} // namespace loom::replay
