#pragma once
// Intents and demand (RFabric §5.3), pure. For each upcoming communication period the runtime
// announces an intent: the RL stage, the dominant primitive mix, the group and the expected
// volume. Collectives expand into rank-to-rank flows; AggregateDemand (Alg. 2 line 4) folds
// them ToR-centrically: per PoD, ToR-ToR demand and ToR-boundary lift/drop demand for the
// OCS-Agg, and PoD-PoD demand for the OCS-Core. Traffic inside a server rides NVLink and
// traffic inside a ToR its EPS; neither needs a circuit.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/allocate.hpp"
#include "fabric/fabric_model.hpp"

namespace loom {

struct rank_flow {
  rank_ref src;
  rank_ref dst;
  double bytes = 0;
};

/// One collective over a group, `bytes` per rank (NCCL's message size).
struct collective {
  primitive kind = primitive::all_reduce;
  std::vector<rank_ref> group;
  double bytes = 0;
  std::vector<double> receive_weights; // all-to-all: rank j's share of every sender's bytes
                                       // (expert load); empty = uniform
};

/// Rank-to-rank flows of a collective, bandwidth-optimal: ring all-reduce sends 2(n-1)/n of
/// the message to the ring successor, all-gather and reduce-scatter (n-1)/n; all-to-all is
/// direct; broadcast a binary tree from group[0]; send/recv pairs 2i -> 2i+1; M2N the first
/// half to the second.
std::vector<rank_flow> collective_flows(const collective& c);

/// The flows of every primitive of an intent over each of its groups, split by its mix (an
/// all-to-all weighted by the intent's receive weights, when it has one per member).
std::vector<rank_flow> intent_flows(const fabric_intent& intent);

/// The demand one PoD's OCS-Agg sees: endpoints 0..tors.size()-1 are its ToRs (global ToR
/// index in `tors`), endpoint tors.size() the PoD boundary.
struct pod_demand {
  std::vector<uint32_t> tors;
  std::vector<demand> demands;
  uint32_t boundary() const { return uint32_t(tors.size()); }
};

struct aggregated_demand {
  std::vector<pod_demand> pods; // OCS-Agg, per PoD
  std::vector<demand> core;     // OCS-Core, endpoints are PoDs
  double local_bytes = 0;       // served inside servers and ToRs
};

/// AggregateDemand: ToR-level per PoD and PoD-level across PoDs, summed, sorted.
aggregated_demand aggregate_demand(const fabric_model& model, const std::vector<rank_flow>& flows);

/// mFabric §5.2 step 1: server-to-server demand inside one PoD's region (endpoints are the
/// PoD's servers in order), from rank flows.
std::vector<demand> server_demand(const fabric_model& model, uint32_t pod,
                                  const std::vector<rank_flow>& flows);

} // namespace loom
