#pragma once
// mFabric's traffic side on the virtual clock (§5.1, App. B): a MoE job's expert popularity
// drifts over iterations, and every layer's first all-to-all must be planned on the regional
// OCS before its gating runs. Each iteration, each layer's dispatch load (tokens per rank)
// follows the previous layer's through a transition that itself drifts; the traffic monitor
// the fabric controller runs live (traffic_monitor) sees every layer's load as the shims would
// report it and predicts the next one. The first all-to-all of layers 1.. is then planned by
// mFabric Alg. 1 (materialize_intent) from the prediction, from perfect knowledge, from the
// previous layer's load ("unchanged topology") and from a uniform split ("static"), and the
// true all-to-all is timed on each plan by the flow model.

#include <cstdint>
#include <vector>

#include "fabric/shape.hpp"

namespace loom::replay {

struct moe_setup {
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
};

struct moe_result {
  int planned = 0;            // first all-to-alls timed (layers 1.., every iteration)
  double prediction_error = 0;  // mean L1 distance of the prediction from the true load
  double unchanged_error = 0;   // the previous layer's load as the guess
  double perfect_s = 0;       // total first-all-to-all time on each plan
  double predicted_s = 0;
  double unchanged_s = 0;
  double static_s = 0;
  int predictions = 0;        // how many had a prediction (the rest fell back to unchanged)
};

moe_result simulate_moe(const moe_setup& setup, uint64_t seed);

} // namespace loom::replay
