#pragma once
// Network cost (OrchestrRL §7.2.3, Fig. 15) from the component prices of App. G Table 4, pure.
// Counting rules, per NIC-attached endpoint (one NIC per GPU):
//   every endpoint       1 NIC, a transceiver at the NIC, a fibre, a transceiver and a port
//                        at its ToR;
//   EPS link upwards     a port and a transceiver at both ends, one fibre;
//   ToR uplink to OCS    a ToR port and transceiver, a fibre, an OCS port (the OCS is
//                        transparent: the far ToR's transceiver terminates the circuit);
//   OCS-Agg to OCS-Core  two OCS ports and a fibre, no transceivers.
// A fat-tree has as many tiers L as its switch radix k needs (2 (k/2)^L endpoints: k^2/2 in
// two tiers, k^3/4 in three, k^4/8 in four); oversubscription r divides the links above the
// ToRs by r. Rail-optimised
// is a non-blocking fat-tree wired per rail: the same parts.

#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct component_prices {
  double link_gbps = 200;
  double transceiver = 0;
  double nic = 0;
  double eps_port = 0;
  double ocs_port = 0;
  double patch_panel_port = 0;
  double fibre = 0;
};

/// Table 4, for 100, 200, 400 or 800 Gbps; nothing for other speeds.
const component_prices* table4_prices(double link_gbps);

enum class network_kind { fat_tree, fat_tree_oversubscribed, rail_optimized, rfabric };

std::string_view to_string(network_kind x);

struct network_design {
  network_kind kind = network_kind::fat_tree;
  double endpoints = 2048;       // NICs
  int switch_radix = 64;         // EPS switch ports
  double oversubscription = 3;   // fat_tree_oversubscribed: down:up at the ToR
  double tor_uplink_ratio = 0.5; // rfabric: ToR uplinks into OCS-Agg per endpoint
  double boundary_ratio = 0.5;   // rfabric: OCS-Agg to OCS-Core ports per endpoint
};

struct network_cost {
  double nics = 0;
  double transceivers = 0;
  double eps_ports = 0;
  double ocs_ports = 0;
  double fibres = 0;
  int tiers = 0;
  double dollars = 0;
};

network_cost price_network(const network_design& design, const component_prices& prices);

} // namespace loom
