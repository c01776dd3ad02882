#pragma once
// OrchestrRL App. I, Fig. 23: one collective's communication time on RFabric when the OCS-Agg
// circuits are allocated traffic-aware (App. D Alg. 3) versus the traffic-oblivious baselines
// (allocate_uniform: every ToR's ports split evenly over the ToR pairs with demand, or over
// every pair of ToRs), all timed by the flow-level model.
//
// Ranks are laid out as a parallelism string such as "TP4_CP8_DP4": the first dimension is the
// fastest-varying. Placed linearly, rank r sits on server r / gpus_per_server, GPU
// r % gpus_per_server; placed randomly, on a seeded permutation of the GPUs. The collective
// runs over every group of the named domain at once.
//
// The paper does not publish its fabric, so one setup is one point: a sweep over ToR uplinks,
// servers per rack and placement gives the range a faithful answer lies in, and each point
// says what bounds it (the ranks' NICs, or the circuits) and what the demand looks like.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/demand.hpp"
#include "fabric/shape.hpp"
#include "types/names.hpp"

namespace loom::replay {

struct parallel_dim {
  std::string name;
  int size = 1;
};

/// "EP64_DP2" -> {EP 64, DP 2}; nothing if malformed.
std::optional<std::vector<parallel_dim>> parse_parallel_layout(const std::string& text);

enum class rank_placement : uint8_t { linear, random };

} // namespace loom::replay

namespace loom {

template <>
struct enum_names<replay::rank_placement> {
  static constexpr std::array<std::pair<replay::rank_placement, std::string_view>, 2> table{{
    {replay::rank_placement::linear, "linear"},
    {replay::rank_placement::random, "random"},
  }};
};

} // namespace loom

namespace loom::replay {

struct collective_setup {
  std::string name;
  primitive kind = primitive::all_to_all;
  std::vector<parallel_dim> layout;
  std::string domain;          // the dimension whose groups run the collective
  double bytes_per_rank = 1e9;
  double expert_skew = 0;      // all-to-all: sigma of lognormal per-rank receive load
  double paper_reduction = 0;  // Fig. 23, for the report
};

/// What bounds a point, and what its ToR-level demand looks like (for the report's notes).
struct collective_facts {
  double nic_bound_s = 0;       // the busiest NIC's bytes at line rate: no fabric does better
  uint32_t demanded_pairs = 0;  // ToR pairs with demand
  uint32_t peers_max = 0;       // the most peers one ToR has demand with
  uint32_t uplinks = 0;         // OCS ports per ToR
  double volume_spread = 0;     // max / min demand over the demanded ToR pairs
};

struct collective_result {
  double traffic_aware_s = 0;
  double algorithm_3_s = 0; // App. D's Alg. 3 alone, without the multi-hop refinement
  double uniform_s = 0;     // even over the demanded ToR pairs
  double uniform_all_s = 0; // even over every pair of ToRs
  uint32_t aware_circuits = 0;
  uint32_t uniform_circuits = 0;
  collective_facts facts;
  double reduction() const { return traffic_aware_s / uniform_s - 1; }
  double algorithm_3_reduction() const { return algorithm_3_s / uniform_s - 1; }
  double reduction_vs_all() const { return traffic_aware_s / uniform_all_s - 1; }
};

/// Every group of the domain, as rank lists, with ranks placed on the GPUs as `placement` says
/// (random: a permutation drawn from `seed`).
std::vector<std::vector<rank_ref>> domain_groups(const std::vector<parallel_dim>& layout,
                                                 const std::string& domain, int gpus_per_server,
                                                 rank_placement placement = rank_placement::linear,
                                                 uint64_t seed = 0);

/// Every allocation of one setup on the shaped fabric; the seed drives the expert load and a
/// random placement.
collective_result evaluate_collective(const rfabric_shape& shape, const collective_setup& setup,
                                      uint64_t seed,
                                      rank_placement placement = rank_placement::linear);

} // namespace loom::replay
