#pragma once
// OrchestrRL App. I, Fig. 23: one collective's communication time on RFabric when the OCS-Agg
// circuits are allocated traffic-aware (App. D Alg. 3) versus split uniformly over the
// demanded ToR pairs, both timed by the flow-level model.
//
// Ranks are laid out as a parallelism string such as "TP4_CP8_DP4": the first dimension is the
// fastest-varying, rank r sits on server r / gpus_per_server, GPU r % gpus_per_server, and the
// collective runs over every group of the named domain at once.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/demand.hpp"
#include "fabric/shape.hpp"

namespace loom::replay {

struct parallel_dim {
  std::string name;
  int size = 1;
};

/// "EP64_DP2" -> {EP 64, DP 2}; nothing if malformed.
std::optional<std::vector<parallel_dim>> parse_parallel_layout(const std::string& text);

struct collective_setup {
  std::string name;
  primitive kind = primitive::all_to_all;
  std::vector<parallel_dim> layout;
  std::string domain;          // the dimension whose groups run the collective
  double bytes_per_rank = 1e9;
  double expert_skew = 0;      // all-to-all: sigma of lognormal per-rank receive load
  double paper_reduction = 0;  // Fig. 23, for the report
};

struct collective_result {
  double traffic_aware_s = 0;
  double uniform_s = 0;
  uint32_t aware_circuits = 0;
  uint32_t uniform_circuits = 0;
  double reduction() const { return traffic_aware_s / uniform_s - 1; }
};

/// Every group of the domain, as rank lists.
std::vector<std::vector<rank_ref>> domain_groups(const std::vector<parallel_dim>& layout,
                                                 const std::string& domain, int gpus_per_server);

/// Both allocations of one setup on the shaped fabric; the seed drives the expert load.
collective_result evaluate_collective(const rfabric_shape& shape, const collective_setup& setup,
                                      uint64_t seed);

} // namespace loom::replay
