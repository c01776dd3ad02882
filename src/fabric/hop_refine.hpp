#pragma once
// Multi-hop refinement of a circuit allocation (Loom, beyond the papers), pure. App. D's Alg. 3
// scores a pair by its own circuits only (Eq. 7). When endpoints have fewer ports than peers
// (App. I's EP64 spans 16 rail ToRs with 4 uplinks each) most demanded pairs get no circuit
// and ride multi-hop over circuits Alg. 3 sized for other pairs, which it cannot see; a
// volume-blind even split then often routes better. This pass swaps the ends of two circuits
// (a-b, c-d becomes a-c, b-d or a-d, b-c: every endpoint keeps its port count) while the
// busiest circuit direction, with every demand routed over shortest paths as switches
// forward it, gets less loaded.

#include <compare>
#include <cstdint>
#include <functional>
#include <vector>

#include "fabric/allocate.hpp"

namespace loom {

/// How well a circuit graph carries a demand routed over shortest paths, hop by hop, each
/// hop's traffic split over the equal-cost next hops in proportion to their circuits (ECMP
/// over ports; flow_model splits per path instead, so the two can differ by a few percent).
/// Lower is better. The circuits of one pair are one ECMP group however they are listed (in
/// any order, over several entries).
struct hop_congestion {
  uint32_t unreachable = 0; // demanded pairs no circuit path joins
  double worst_s = 0;       // the busiest circuit direction: its bytes over its capacity
  double spread = 0;        // sum of every direction's squared time: breaks ties on worst_s

  friend auto operator<=>(const hop_congestion&, const hop_congestion&) = default;
};

hop_congestion congestion(uint32_t endpoints, const std::vector<circuit_count>& circuits,
                          const std::vector<demand>& demands, double link_bytes_per_s);

/// The circuits after degree-preserving swaps that lower congestion(), tried in a fixed
/// pseudo-random order, so the result depends only on the input. `eligible`, if given, must
/// hold for every circuit a swap creates. Stops when 32 tries per circuit in a row find
/// nothing better or a fixed work budget (arcs scanned, as three scans per destination would:
/// about 22 ms on a 64-ToR PoD) is spent.
std::vector<circuit_count> refine_for_hops(uint32_t endpoints, std::vector<circuit_count> circuits,
                                           const std::vector<demand>& demands,
                                           double link_bytes_per_s,
                                           const std::function<bool(uint32_t, uint32_t)>& eligible = {});

} // namespace loom
