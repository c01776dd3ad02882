#pragma once
// Greedy circuit allocation, OrchestrRL App. D Algorithm 3 (= mFabric Alg. 1), pure: add one
// full-duplex circuit at a time to the demanded, eligible endpoint pair with the largest
// completion-time proxy T_pair = max(D_uv, D_vu) / (c_uv B_link) (Eq. 7), where a demanded
// pair without circuits counts as infinite and ties among those go to the larger directional
// demand, until no demanded pair has a free port at both ends (Eq. 6). Pairs that still tie
// (equal volumes: a uniform all-to-all, a ring) go in a fixed scrambled order, not pair order:
// in pair order the low-numbered switches would spend their ports on each other and leave a
// clustered, poorly connected circuit graph.
//
// Demanded pairs without circuits all rank infinite, in a fixed order, so they are served in
// that order, a band of the next-ranked at a time (an endpoint has a few ports: most pairs are
// never reached); a max-heap over pairs that have circuits does the rest, each step changing
// only the chosen pair's key.

#include <cstdint>
#include <functional>
#include <vector>

#include "types/fabric.hpp"

namespace loom {

struct demand {
  uint32_t from = 0;
  uint32_t to = 0;
  double bytes = 0; // D_{from -> to} for the coming period
};

struct allocation {
  std::vector<circuit_count> circuits; // sorted by (a, b)
  std::vector<uint32_t> free_ports;    // per endpoint, after allocation
  uint64_t steps = 0;

  uint32_t circuits_between(uint32_t u, uint32_t v) const;
};

/// Endpoints are 0..ports.size()-1 with ports[v] = deg(v). `eligible`, if given, is the
/// template's ELIGIBLE(u, v); demands between ineligible pairs get no circuits.
allocation allocate_circuits(const std::vector<uint32_t>& ports,
                             const std::vector<demand>& demands, double link_bytes_per_s,
                             const std::function<bool(uint32_t, uint32_t)>& eligible = {});

/// The traffic-oblivious baselines of OrchestrRL App. I (Fig. 23): every endpoint splits its
/// ports evenly over its pairs, whatever their volumes. Circuits go one at a time to the pair
/// with the fewest so far, between the endpoints with the most ports left (then the lower
/// pair), so every pair has one before any has two and no endpoint runs out of ports while
/// others have plenty. The pairs are those with demand (`demanded_only`: uniform over the
/// demanded pairs) or every eligible pair of endpoints (uniform over all switches: blind to
/// which pairs talk at all).
allocation allocate_uniform(const std::vector<uint32_t>& ports, const std::vector<demand>& demands,
                            const std::function<bool(uint32_t, uint32_t)>& eligible = {},
                            bool demanded_only = true);

/// Eq. 7 for one pair: the time its slower direction needs on `circuits` circuits.
double pair_time(double bytes_uv, double bytes_vu, uint32_t circuits, double link_bytes_per_s);

} // namespace loom
