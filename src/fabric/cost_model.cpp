#include "fabric/cost_model.hpp"

#include <cmath>

namespace loom {

const component_prices* table4_prices(double link_gbps) {
  // OrchestrRL App. G, Table 4: transceiver, NIC, electrical switch port, OCS port, patch
  // panel port, fibre cable, in dollars.
  static const std::vector<component_prices> table{
    {100, 249, 736, 215, 350, 100, 25},
    {200, 499, 1291, 876, 350, 100, 45},
    {400, 799, 1710, 1392, 350, 100, 65},
    {800, 1599, 2347, 1731, 350, 100, 92},
  };
  for (auto& p : table)
    if (p.link_gbps == link_gbps)
      return &p;
  return nullptr;
}

std::string_view to_string(network_kind x) {
  switch (x) {
    case network_kind::fat_tree: return "fat-tree";
    case network_kind::fat_tree_oversubscribed: return "fat-tree-3:1";
    case network_kind::rail_optimized: return "rail-optimized";
    case network_kind::rfabric: return "rfabric";
  }
  return "?";
}

network_cost price_network(const network_design& d, const component_prices& p) {
  network_cost c;
  const double n = d.endpoints;
  const double k = d.switch_radix;
  // Endpoint access: NIC, two transceivers, a fibre, a ToR port.
  c.nics = n;
  c.transceivers = 2 * n;
  c.fibres = n;
  c.eps_ports = n;
  auto eps_links = [&](double links) {
    c.eps_ports += 2 * links;
    c.transceivers += 2 * links;
    c.fibres += links;
  };
  if (d.kind == network_kind::rfabric) {
    c.tiers = 1;
    double up = n * d.tor_uplink_ratio;
    c.eps_ports += up;
    c.transceivers += up;
    c.fibres += up;
    c.ocs_ports += up;
    double boundary = n * d.boundary_ratio;
    c.ocs_ports += 2 * boundary;
    c.fibres += boundary;
  } else {
    // A folded Clos of L tiers of radix-k switches serves 2 (k/2)^L endpoints.
    c.tiers = 1;
    while (n > 2 * std::pow(k / 2, c.tiers))
      ++c.tiers;
    double above = d.kind == network_kind::fat_tree_oversubscribed ? n / d.oversubscription : n;
    for (int t = 1; t < c.tiers; ++t)
      eps_links(above);
  }
  c.dollars = c.nics * p.nic + c.transceivers * p.transceiver + c.eps_ports * p.eps_port
              + c.ocs_ports * p.ocs_port + c.fibres * p.fibre;
  return c;
}

} // namespace loom
