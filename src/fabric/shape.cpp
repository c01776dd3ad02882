#include "fabric/shape.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom {

shaped_fabric make_rfabric(const rfabric_shape& s) {
  shaped_fabric out;
  auto& t = out.config;
  t.kind = fabric_kind::rfabric;
  t.link_gbps = s.link_gbps;
  t.nics_per_server = s.gpus_per_server;
  const int tors_per_pod = s.racks_per_pod * s.gpus_per_server;
  std::vector<int> core_ports(size_t(std::max(1, s.core_devices)), 0);
  std::vector<fabric_link> boundary;
  for (int p = 0; p < s.pods; ++p) {
    pod pd{fmt::format("pod{}", p), {}};
    auto agg = fmt::format("agg{}", p);
    for (int r = 0; r < s.racks_per_pod; ++r) {
      std::vector<std::string> rack;
      for (int i = 0; i < s.servers_per_rack; ++i) {
        auto id = fmt::format("p{}r{}s{}", p, r, i);
        out.nodes.push_back({id, pool_kind::training, "H800", s.gpus_per_server, 2048});
        rack.push_back(id);
        pd.servers.push_back(id);
      }
      for (int rail = 0; rail < s.gpus_per_server; ++rail) {
        int local = r * s.gpus_per_server + rail;
        auto tor_id = fmt::format("tor-p{}-r{}-rail{}", p, r, rail);
        t.tors.push_back({tor_id, pd.id, rail, s.servers_per_rack + s.tor_uplinks, rack});
        for (int u = 0; u < s.tor_uplinks; ++u)
          t.links.push_back({{tor_id, s.servers_per_rack + u + 1},
                             {agg, local * s.tor_uplinks + u + 1}});
      }
    }
    ocs_device dev;
    dev.id = agg;
    dev.tier = ocs_tier::agg;
    dev.pod = pd.id;
    dev.ports = tors_per_pod * s.tor_uplinks + s.boundary_ports;
    dev.reconfig_ms = s.agg_reconfig_ms;
    t.ocs.push_back(dev);
    for (int b = 0; b < s.boundary_ports; ++b) {
      size_t core = size_t(b) % core_ports.size();
      boundary.push_back({{agg, tors_per_pod * s.tor_uplinks + b + 1},
                          {fmt::format("core{}", core), ++core_ports[core]}});
    }
    t.pods.push_back(std::move(pd));
  }
  if (s.boundary_ports > 0)
    for (size_t c = 0; c < core_ports.size(); ++c) {
      ocs_device dev;
      dev.id = fmt::format("core{}", c);
      dev.tier = ocs_tier::core;
      dev.ports = core_ports[c];
      dev.reconfig_ms = s.core_reconfig_ms;
      t.ocs.push_back(dev);
    }
  t.links.insert(t.links.end(), boundary.begin(), boundary.end());
  return out;
}

shaped_fabric make_mfabric_region(const mfabric_shape& s) {
  shaped_fabric out;
  auto& t = out.config;
  t.kind = fabric_kind::mfabric;
  t.link_gbps = s.link_gbps;
  t.nics_per_server = s.gpus_per_server;
  pod region{"region", {}};
  for (int i = 0; i < s.servers; ++i) {
    auto id = fmt::format("moe-{}", i);
    out.nodes.push_back({id, pool_kind::training, "H800", s.gpus_per_server, 2048});
    region.servers.push_back(id);
  }
  t.pods.push_back(region);
  ocs_device dev;
  dev.id = "region-ocs";
  dev.tier = ocs_tier::regional;
  dev.pod = region.id;
  dev.ports = s.servers * s.ocs_nics;
  dev.reconfig_ms = s.reconfig_ms;
  for (int k = 0; k < s.ocs_nics; ++k)
    dev.nics.push_back(k * s.gpus_per_server / s.ocs_nics);
  t.ocs.push_back(dev);
  // The other NICs stay on EPS: one rail ToR each.
  for (int nic = 0; nic < s.gpus_per_server; ++nic)
    if (std::find(dev.nics.begin(), dev.nics.end(), nic) == dev.nics.end())
      t.tors.push_back({fmt::format("eps-r{}", nic), region.id, nic, s.servers, region.servers});
  return out;
}

} // namespace loom
