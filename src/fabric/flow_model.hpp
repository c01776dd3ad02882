#pragma once
// Flow-level network model for replay and evaluation, pure. Directed links with capacities;
// flows share them max-min fairly (progressive filling), recomputed whenever a flow finishes,
// so a collective's completion time is that of its last flow. fabric_network lays a circuit
// plan over a fabric: NIC-ToR EPS links, ToR-ToR and lift/drop circuits on the OCS-Agg, and
// PoD-PoD circuits on the OCS-Core; ToRs forward, so a pair without a circuit goes multi-hop,
// split evenly over its shortest paths (ECMP, at most 8). On mFabric the regional circuits
// join servers directly (a circuit is a NIC pair) and servers relay the same way.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "fabric/allocate.hpp"
#include "fabric/demand.hpp"
#include "fabric/fabric_model.hpp"

namespace loom {

class flow_network {
public:
  struct flow {
    std::vector<uint32_t> links;
    double bytes = 0;
  };

  uint32_t add_link(double bytes_per_s);
  size_t links() const { return capacity_.size(); }
  double capacity(uint32_t link) const { return capacity_[link]; }

  /// Max-min fair rates of flows that all run now.
  std::vector<double> max_min_rates(const std::vector<flow>& flows) const;

  /// When the last flow finishes, all starting together; infinity if one can never move.
  double completion_s(const std::vector<flow>& flows) const;

private:
  std::vector<double> capacity_;
};

class fabric_network {
public:
  fabric_network(const fabric_model& model, const circuit_layout& layout);

  /// Rank flows as network flows; flows inside a server (NVLink) carry no network load.
  /// `unroutable` counts flows between ToRs that no circuit path joins.
  std::vector<flow_network::flow> route(const std::vector<rank_flow>& flows,
                                        size_t* unroutable = nullptr) const;

  /// Completion time of the flows (a collective, a broadcast tree, a point-to-point transfer).
  double completion_s(const std::vector<rank_flow>& flows) const;

  const flow_network& network() const { return net_; }

private:
  struct edge {
    uint32_t to;
    uint32_t link;
  };
  const std::vector<std::vector<uint32_t>>& paths(uint32_t from, uint32_t to) const;

  const fabric_model* model_;
  flow_network net_;
  std::vector<uint32_t> nic_up_;   // server * rails + nic -> link
  std::vector<uint32_t> nic_down_;
  std::vector<std::vector<edge>> adj_;  // ToRs, a lift and a drop node per PoD, then servers
  std::vector<std::vector<edge>> radj_; // the same arcs reversed
  std::vector<uint32_t> server_node_;   // mFabric: each server's node (its regional circuits)
  mutable std::map<std::pair<uint32_t, uint32_t>, std::vector<std::vector<uint32_t>>> paths_;
};

} // namespace loom
