#pragma once
// Weight-sync dissemination forest, OrchestrRL App. E (RFabric §5.2), pure. Phase A seeds a few
// Gen receivers per destination PoD from the Train shard holders over OCS-Core, in waves whose
// inter-PoD circuits respect every PoD's boundary budget d_p (each edge gets at least one
// circuit, spare budget equalises the per-edge bottlenecks); Phase B fans out inside each PoD
// from its seeds along k-ary trees. Also the two baselines the issue compares against: flat
// one-to-all over the same budgets, and WEAVE §5.2's one copy across the cross-cluster link
// followed by a broadcast.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fabric/demand.hpp"
#include "fabric/fabric_model.hpp"

namespace loom {

struct endpoint_ref {
  uint32_t id = 0;  // rank / NIC
  uint32_t pod = 0;
};

struct broadcast_params {
  double shard_bytes = 0;
  double core_link_bytes_per_s = 25e9;  // one OCS-Core circuit (B_link)
  double intra_link_bytes_per_s = 25e9; // one endpoint's NIC inside a PoD
  std::vector<uint32_t> pod_budget;     // d_p, indexed by PoD
  uint32_t seeds_per_pod = 1;
  uint32_t fanout = 2;                  // Phase B tree arity
  double chunk_bytes = 64e6;            // pipelining granularity of the trees
};

struct broadcast_edge {
  endpoint_ref from;
  endpoint_ref to;
  uint32_t circuits = 1;
};

struct broadcast_plan {
  std::vector<std::vector<broadcast_edge>> waves; // Phase A
  std::vector<endpoint_ref> seeds;
  std::vector<std::pair<uint32_t, uint32_t>> parent; // (receiver id, the id it receives from)
  double phase_a_s = 0;
  double phase_b_s = 0;
  double total_s() const { return phase_a_s + phase_b_s; }
  bool feasible = true; // false if some PoD has no budget at all
};

/// The two-level forest.
broadcast_plan plan_broadcast(const std::vector<endpoint_ref>& holders,
                              const std::vector<endpoint_ref>& receivers,
                              const broadcast_params& params);

/// Flat one-to-all: every receiver outside the holders' PoDs is an inter-PoD edge of its own.
broadcast_plan plan_flat_broadcast(const std::vector<endpoint_ref>& holders,
                                   const std::vector<endpoint_ref>& receivers,
                                   const broadcast_params& params);

/// WEAVE §5.2: one copy over the cross-cluster link, then a k-ary broadcast from it.
double one_copy_then_broadcast_s(size_t receivers, double cross_link_bytes_per_s,
                                 const broadcast_params& params);

/// Phase B cost: `receivers` endpoints fed from `roots` along pipelined k-ary trees.
double fanout_s(size_t roots, size_t receivers, const broadcast_params& params);

/// A weight-sync intent's flows along the two-level forest: members[0] holds the shard, the
/// rest receive it; Phase A seeds cross the core, Phase B fans out inside each PoD. d_p is
/// each PoD's boundary port count.
std::vector<rank_flow> forest_flows(const fabric_model& model, const fabric_intent& intent);

/// The flows the fabric is planned for: a weight-sync broadcast rides the forest, anything
/// else its intent's collectives.
std::vector<rank_flow> planned_flows(const fabric_model& model, const fabric_intent& intent);

} // namespace loom
