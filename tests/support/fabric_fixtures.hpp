#pragma once
// Small fabrics the fabric tests share.

#include "fabric/fabric_model.hpp"
#include "fabric/shape.hpp"

namespace loom::test {

/// Two PoDs of one rack with two 2-GPU servers: ToRs (pod, rail) = 0:(0,0) 1:(0,1) 2:(1,0)
/// 3:(1,1); `uplinks` per ToR into the PoD's OCS-Agg, two boundary ports per PoD on one core.
inline fabric_model two_pods(int uplinks) {
  rfabric_shape s;
  s.pods = 2;
  s.servers_per_rack = 2;
  s.gpus_per_server = 2;
  s.tor_uplinks = uplinks;
  s.boundary_ports = 2;
  auto f = make_rfabric(s);
  return *fabric_model::build(f.config, f.nodes).value;
}

/// PoD p0 (server a, rails 0-1) has two OCS-Agg devices: its ToRs go up into agg-a only, its
/// boundary ports leave from agg-b only, so nothing in p0 can lift to the core. PoD p1
/// (servers b, c) is wired normally.
inline fabric_model split_agg_pods() {
  fabric_config t;
  t.kind = fabric_kind::rfabric;
  t.link_gbps = 200;
  t.nics_per_server = 2;
  t.pods = {{"p0", {"a"}}, {"p1", {"b", "c"}}};
  t.tors = {{"a0", "p0", 0, 4, {}}, {"a1", "p0", 1, 4, {}}, {"b0", "p1", 0, 4, {}},
            {"b1", "p1", 1, 4, {}}};
  auto device = [](std::string id, ocs_tier tier, std::string pod, int ports) {
    ocs_device d;
    d.id = std::move(id);
    d.tier = tier;
    d.pod = std::move(pod);
    d.ports = ports;
    d.reconfig_ms = 25;
    return d;
  };
  t.ocs = {device("agg-a", ocs_tier::agg, "p0", 4), device("agg-b", ocs_tier::agg, "p0", 2),
           device("agg-c", ocs_tier::agg, "p1", 6), device("core", ocs_tier::core, "", 4)};
  t.links = {{{"a0", 2}, {"agg-a", 1}}, {{"a0", 3}, {"agg-a", 2}}, {{"a1", 2}, {"agg-a", 3}},
             {{"a1", 3}, {"agg-a", 4}}, {{"agg-b", 1}, {"core", 1}}, {{"agg-b", 2}, {"core", 2}},
             {{"b0", 2}, {"agg-c", 1}}, {{"b0", 3}, {"agg-c", 2}}, {{"b1", 2}, {"agg-c", 3}},
             {{"b1", 3}, {"agg-c", 4}}, {{"agg-c", 5}, {"core", 3}}, {{"agg-c", 6}, {"core", 4}}};
  return *fabric_model::build(t, {{"a", pool_kind::training, "H800", 2, 1024},
                                  {"b", pool_kind::training, "H800", 2, 1024},
                                  {"c", pool_kind::training, "H800", 2, 1024}})
            .value;
}

} // namespace loom::test
