#define BOOST_TEST_MODULE fabric_plan
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "config/config.hpp"
#include "fabric/circuit_plan.hpp"
#include "fabric/demand.hpp"
#include "fabric/fabric_model.hpp"
#include "fabric/flow_model.hpp"
#include "fabric/shape.hpp"
#include "fabric/stage_template.hpp"
#include "protocol/error.hpp"
#include "support/fabric_fixtures.hpp"

using namespace loom;

namespace {

fabric_model shaped(const rfabric_shape& s) {
  auto f = make_rfabric(s);
  auto m = fabric_model::build(f.config, f.nodes).value;
  BOOST_REQUIRE(m);
  return std::move(*m);
}

using test::two_pods;

fabric_intent intent_of(fabric_stage stage, std::vector<rank_ref> members) {
  return {"job-a", stage, {{primitive::all_reduce, 1.0}}, std::move(members), 1e9};
}

} // namespace

BOOST_AUTO_TEST_SUITE(topology_model)

BOOST_AUTO_TEST_CASE(regular_shape_indexes_tors_boundaries_and_racks) {
  rfabric_shape s;
  s.pods = 2;
  s.racks_per_pod = 2;
  s.servers_per_rack = 2;
  s.gpus_per_server = 4;
  s.tor_uplinks = 3;
  s.boundary_ports = 4;
  s.core_devices = 2;
  auto m = shaped(s);
  BOOST_CHECK_EQUAL(m.servers.size(), 8u);
  BOOST_CHECK_EQUAL(m.tors.size(), 16u); // 2 PoDs x 2 racks x 4 rails
  BOOST_CHECK_EQUAL(m.boundaries.size(), 8u);
  for (auto& t : m.tors)
    BOOST_CHECK_EQUAL(t.uplinks.size(), 3u);
  // Server 2 is in rack 1 of PoD 0: its rail-3 NIC hangs off ToR (pod 0, rack 1, rail 3).
  BOOST_CHECK_EQUAL(m.tors[size_t(m.tor_of({2, 3}))].id, "tor-p0-r1-rail3");
  BOOST_CHECK_EQUAL(m.pod_of({5, 0}), 1u);
  // Boundary ports alternate over the two core devices.
  BOOST_CHECK_NE(m.boundaries[0].core.device, m.boundaries[1].core.device);
}

BOOST_AUTO_TEST_CASE(built_from_config_with_racks_regional_nics_and_wiring_errors) {
  const char* text = R"(
[service]
name = "t"
[endpoints]
gateway = "tcp://127.0.0.1:5555"
metrics = "127.0.0.1:0"
[storage]
path = "x"
[cluster]
name = "c"
cross_link_gbps = 20.0
[[cluster.rollout]]
id = "r0"
gpu = "H20"
gpus = 8
host_memory_gb = 1024
[[cluster.training]]
id = "n{0..3}"
gpu = "H800"
gpus = 8
host_memory_gb = 1024
[fabric]
kind = "rfabric"
link_gbps = 200
nics_per_server = 2
[[fabric.pods]]
id = "p0"
servers = ["n0", "n1"]
[[fabric.pods]]
id = "p1"
servers = ["n2", "n3"]
[[fabric.tors]]
id = "t0"
pod = "p0"
rail = 0
ports = 8
servers = ["n0"]
[[fabric.tors]]
id = "t1"
pod = "p0"
rail = 0
ports = 8
servers = ["n1"]
[[fabric.ocs]]
id = "agg0"
tier = "agg"
pod = "p0"
ports = 8
[[fabric.ocs]]
id = "core"
tier = "core"
ports = 8
[[fabric.ocs]]
id = "reg1"
tier = "regional"
pod = "p1"
ports = 4
nics = [0, 1]
[[fabric.links]]
from = "t0:{5..6}"
to = "agg0:{1..2}"
[[fabric.links]]
from = "agg0:{7..8}"
to = "core:{1..2}"
)";
  auto cfg = parse_config(text, "fabric.toml");
  BOOST_REQUIRE_MESSAGE(cfg.value, (cfg.errors.empty() ? "" : cfg.errors[0].to_string()));
  std::vector<node> nodes = cfg.value->cluster.training;
  auto m = fabric_model::build(cfg.value->fabric, nodes).value;
  BOOST_REQUIRE(m);
  BOOST_CHECK_EQUAL(m->tors[size_t(m->tor_of({0, 0}))].id, "t0"); // racks split rail 0
  BOOST_CHECK_EQUAL(m->tors[size_t(m->tor_of({1, 0}))].id, "t1");
  BOOST_CHECK_EQUAL(m->tors[0].uplinks.size(), 2u);
  BOOST_CHECK_EQUAL(m->boundaries.size(), 2u);
  BOOST_CHECK_EQUAL(m->nic_links.size(), 4u); // n2, n3 x NICs 0, 1 on reg1
  BOOST_CHECK_EQUAL(m->nic_links[3].port.port, 4u);

  // A ToR wired straight into the core is not RFabric.
  auto bad = cfg.value->fabric;
  bad.links.push_back({{"t1", 5}, {"core", 3}});
  auto err = fabric_model::build(bad, nodes);
  BOOST_REQUIRE(!err.value);
  BOOST_CHECK_NE(err.error.find("OCS-Agg"), std::string::npos);
  // Two racks claiming one server's NIC.
  auto twice = cfg.value->fabric;
  twice.tors[1].servers = {"n0"};
  BOOST_CHECK(!fabric_model::build(twice, nodes).value);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(intents_and_demand)

BOOST_AUTO_TEST_CASE(collectives_expand_to_bandwidth_optimal_flows) {
  std::vector<rank_ref> g{{0, 0}, {1, 0}, {2, 0}, {3, 0}};
  auto ring = collective_flows({primitive::all_reduce, g, 8e9, {}});
  BOOST_REQUIRE_EQUAL(ring.size(), 4u);
  BOOST_CHECK_CLOSE(ring[0].bytes, 2.0 * 3 / 4 * 8e9, 1e-9);
  BOOST_CHECK(ring[3].dst == g[0]);
  // All-to-all with receive weights 1:1:1:3: rank 0 sends 3/5 of its bytes to rank 3.
  auto a2a = collective_flows({primitive::all_to_all, g, 5e9, {1, 1, 1, 3}});
  BOOST_REQUIRE_EQUAL(a2a.size(), 12u);
  double to3 = 0;
  for (auto& f : a2a)
    if (f.src == g[0] && f.dst == g[3])
      to3 = f.bytes;
  BOOST_CHECK_CLOSE(to3, 3e9, 1e-9);
  auto tree = collective_flows({primitive::broadcast, g, 1e9, {}});
  BOOST_CHECK_EQUAL(tree.size(), 3u);
  BOOST_CHECK(tree[2].src == g[1]); // rank 3 hangs off rank 1
}

BOOST_AUTO_TEST_CASE(aggregate_demand_is_tor_centric_per_pod_and_pod_level_on_the_core) {
  auto m = two_pods(4);
  std::vector<rank_flow> flows{
    {{0, 0}, {0, 1}, 5},  // same server: NVLink
    {{0, 0}, {1, 0}, 7},  // same ToR (rail 0 of PoD 0): EPS
    {{0, 0}, {1, 1}, 11}, // ToR 0 -> ToR 1 in PoD 0
    {{1, 1}, {2, 0}, 13}, // PoD 0 ToR 1 -> PoD 1 ToR 0 (global ToR 2)
  };
  auto d = aggregate_demand(m, flows);
  BOOST_CHECK_EQUAL(d.local_bytes, 12.0);
  BOOST_REQUIRE_EQUAL(d.pods[0].demands.size(), 2u);
  BOOST_CHECK_EQUAL(d.pods[0].demands[0].to, 1u);
  BOOST_CHECK_EQUAL(d.pods[0].demands[1].from, 1u); // lift from ToR 1 ...
  BOOST_CHECK_EQUAL(d.pods[0].demands[1].to, d.pods[0].boundary()); // ... to the boundary
  BOOST_REQUIRE_EQUAL(d.pods[1].demands.size(), 1u);
  BOOST_CHECK_EQUAL(d.pods[1].demands[0].from, d.pods[1].boundary()); // drop
  BOOST_CHECK_EQUAL(d.pods[1].demands[0].to, 0u);
  BOOST_REQUIRE_EQUAL(d.core.size(), 1u);
  BOOST_CHECK_EQUAL(d.core[0].bytes, 13.0);
}

BOOST_AUTO_TEST_CASE(templates_are_stage_aware_and_cached_per_recurring_intent) {
  auto m = two_pods(4);
  template_cache cache;
  auto gen = intent_of(fabric_stage::gen, {{0, 0}, {2, 0}});
  auto& t = cache.get(m, gen);
  BOOST_CHECK_EQUAL(t.core_slice, 1u);
  BOOST_CHECK(t.core_eligible(0, 1));
  cache.get(m, gen);
  BOOST_CHECK_EQUAL(cache.hits(), 1u);
  auto sync = intent_of(fabric_stage::train_grad_sync, {{0, 0}, {1, 0}});
  auto& ts = cache.get(m, sync);
  BOOST_CHECK_EQUAL(ts.core_slice, 0u);
  BOOST_CHECK(!ts.core_eligible(0, 1)); // the job lives in PoD 0 only
  BOOST_CHECK_EQUAL(cache.misses(), 2u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(flow_model)

BOOST_AUTO_TEST_CASE(max_min_fair_by_hand) {
  flow_network net;
  auto wide = net.add_link(10);
  auto narrow = net.add_link(4);
  // f2 is held to 4 by the narrow link; f1 takes the rest of the wide one.
  std::vector<flow_network::flow> flows{{{wide}, 12}, {{wide, narrow}, 8}};
  auto r = net.max_min_rates(flows);
  BOOST_CHECK_CLOSE(r[0], 6.0, 1e-9);
  BOOST_CHECK_CLOSE(r[1], 4.0, 1e-9);
  BOOST_CHECK_CLOSE(net.completion_s(flows), 2.0, 1e-9);
  // f1 done at 1 s (6 bytes at 6/s); f2 keeps 4/s, so it still ends at 2 s.
  flows[0].bytes = 6;
  BOOST_CHECK_CLOSE(net.completion_s(flows), 2.0, 1e-9);
  // Three equal flows on one link finish together at 3x the single-flow time.
  std::vector<flow_network::flow> three(3, {{narrow}, 4});
  BOOST_CHECK_CLOSE(net.completion_s(three), 3.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(circuits_carry_multi_hop_traffic_and_missing_paths_are_infinite) {
  auto m = two_pods(4);
  const double b = m.link_bytes_per_s;
  circuit_layout layout;
  layout.agg = {{{0, 1, 2}}, {}}; // two circuits ToR 0 - ToR 1 in PoD 0
  fabric_network net(m, layout);
  // Rail 0 of server 0 to rail 1 of server 1: NIC up, 2 circuits, NIC down: the NICs bind.
  BOOST_CHECK_CLOSE(net.completion_s({{{0, 0}, {1, 1}, 10 * b}}), 10.0, 1e-9);
  // Four such flows share the NICs pairwise and the 2 circuits: 4 x 10 B over 2B = 20 s.
  std::vector<rank_flow> four{{{0, 0}, {1, 1}, 10 * b}, {{1, 0}, {0, 1}, 0}, {{1, 0}, {0, 1}, 10 * b}};
  four.push_back({{0, 0}, {0, 1}, 10 * b}); // same server: NVLink, free
  BOOST_CHECK_CLOSE(net.completion_s(four), 10.0, 1e-9);
  // PoD 1 has no circuits: its ToRs cannot reach each other.
  BOOST_CHECK(std::isinf(net.completion_s({{{2, 0}, {3, 1}, 1}})));
  // Core path: lift, core, drop.
  circuit_layout inter;
  inter.agg = {{{0, 2, 1}}, {{0, 2, 1}}}; // ToR 0 <-> boundary in each PoD
  inter.core = {{0, 1, 1}};
  fabric_network wan(m, inter);
  BOOST_CHECK_CLOSE(wan.completion_s({{{0, 0}, {2, 0}, 3 * b}}), 3.0, 1e-9);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(materialisation)

BOOST_AUTO_TEST_CASE(uniform_splitting_ignores_volumes) {
  auto aware = allocate_circuits({4, 4, 4}, {{0, 1, 300}, {2, 0, 100}}, 1.0);
  auto uniform = allocate_uniform({4, 4, 4}, {{0, 1, 300}, {2, 0, 100}});
  BOOST_CHECK_EQUAL(aware.circuits_between(0, 1), 3u);
  BOOST_CHECK_EQUAL(uniform.circuits_between(0, 1), 2u);
  BOOST_CHECK_EQUAL(uniform.circuits_between(0, 2), 2u);
}

BOOST_AUTO_TEST_CASE(uniform_splitting_spreads_every_endpoints_ports_evenly) {
  // Eight switches of four ports, all talking to all: each uses its four ports on four
  // different peers (in pair order, the low-numbered ones would fill up on each other and
  // leave the others doubling up).
  std::vector<demand> all;
  for (uint32_t u = 0; u < 8; ++u)
    for (uint32_t v = 0; v < 8; ++v)
      if (u != v)
        all.push_back({u, v, 1.0 + u});
  auto even = allocate_uniform(std::vector<uint32_t>(8, 4), all);
  BOOST_CHECK_EQUAL(even.steps, 16u);
  std::vector<uint32_t> degree(8, 0);
  for (auto& c : even.circuits) {
    BOOST_CHECK_EQUAL(c.circuits, 1u);
    ++degree[c.a];
    ++degree[c.b];
  }
  BOOST_CHECK(degree == std::vector<uint32_t>(8, 4));
  // Uniform over all switches does not even look at who talks: 0 <-> 1 gets one circuit.
  auto blind = allocate_uniform({4, 4, 4, 4, 4}, {{0, 1, 1e9}}, {}, false);
  BOOST_CHECK_EQUAL(blind.circuits_between(0, 1), 1u);
  BOOST_CHECK_EQUAL(blind.steps, 10u);
  BOOST_CHECK_EQUAL(allocate_uniform({4, 4, 4, 4, 4}, {{0, 1, 1e9}}).circuits_between(0, 1), 4u);
}

BOOST_AUTO_TEST_CASE(core_and_agg_plans_with_concrete_ports) {
  auto m = two_pods(4);
  // ToR 0 -> ToR 1 in PoD 0 (light), ToR 0 of PoD 0 -> ToR 0 of PoD 1 (heavy).
  std::vector<rank_flow> flows{{{0, 0}, {1, 1}, 1e9}, {{0, 0}, {2, 0}, 8e9}};
  auto d = aggregate_demand(m, flows);
  auto tpl = select_template(m, intent_of(fabric_stage::train_grad_sync, {{0, 0}, {2, 0}}));
  port_usage usage(m);
  auto r = materialize_plan(m, tpl, d, usage, "job-a");
  BOOST_REQUIRE_MESSAGE(r.plan, r.rejection);
  auto& plan = *r.plan;
  // Core: both boundary ports of each PoD carry the one demanded pair.
  BOOST_REQUIRE_EQUAL(plan.layout.core.size(), 1u);
  BOOST_CHECK_EQUAL(plan.layout.core[0].circuits, 2u);
  // PoD 0's Agg: the inf rule gives ToR0-boundary (8 GB) and ToR0-ToR1 (1 GB) one each, the
  // heavy lift takes the second boundary port (every core circuit is lifted: coupling holds),
  // and ToR0's last two uplinks go to the only pair still demanded with free ports.
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> agg0;
  for (auto& c : plan.layout.agg[0])
    agg0[{c.a, c.b}] = c.circuits;
  BOOST_CHECK_EQUAL((agg0[{0, 1}]), 2u);
  BOOST_CHECK_EQUAL((agg0[{0, 2}]), 2u);
  // Concrete ports: each used once, ToR-ToR circuits join two uplinks of one device.
  std::set<ocs_port> used;
  for (auto& p : plan_ports(plan))
    BOOST_CHECK(used.insert(p).second);
  BOOST_CHECK(validate_plan(m, plan, usage).empty());
  // Cross-connects: a duplex circuit is two simplex cross-connects on a P x P switch.
  auto core_dev = *m.device_index("core0");
  auto xcs = device_cross_connects(m, plan.circuits, core_dev);
  BOOST_CHECK_EQUAL(xcs.size(), 4u);
  for (auto& x : xcs)
    BOOST_CHECK_GT(x.out, m.devices[core_dev].ports);
}

BOOST_AUTO_TEST_CASE(core_agg_coupling_rejects_a_plan_the_pod_cannot_lift) {
  // PoD p0's boundary ports leave from an OCS-Agg its ToRs do not reach: the core circuits
  // to p1 could never be lifted in p0.
  auto m = test::split_agg_pods();
  std::vector<rank_flow> flows{{{0, 0}, {1, 0}, 8e9}};
  auto d = aggregate_demand(m, flows);
  auto tpl = select_template(m, intent_of(fabric_stage::train_grad_sync, {{0, 0}, {1, 0}}));
  port_usage usage(m);
  auto r = materialize_plan(m, tpl, d, usage, "job-a");
  BOOST_CHECK(!r.plan);
  BOOST_CHECK_NE(r.rejection.find("Core-Agg coupling: PoD 'p0' uses 2 boundary ports on the "
                                  "core but its OCS-Agg lifts only 0"),
                 std::string::npos);
  BOOST_TEST_MESSAGE("rejected: " << r.rejection);
  // Port reservations keep the coupling: ToR 0 of two_pods(2) has two uplinks and needs one
  // for ToR 1, so the core gets only the one circuit ToR 0 can still lift.
  auto small = two_pods(2);
  auto both = aggregate_demand(small, {{{0, 0}, {1, 1}, 1e9}, {{0, 0}, {2, 0}, 8e9}});
  auto fits = materialize_plan(small, tpl, both, port_usage(small), "job-a");
  BOOST_REQUIRE_MESSAGE(fits.plan, fits.rejection);
  BOOST_REQUIRE_EQUAL(fits.plan->layout.core.size(), 1u);
  BOOST_CHECK_EQUAL(fits.plan->layout.core[0].circuits, 1u);
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> agg0;
  for (auto& c : fits.plan->layout.agg[0])
    agg0[{c.a, c.b}] = c.circuits;
  BOOST_CHECK_EQUAL((agg0[{0, 1}]), 1u); // ToR 0 - ToR 1
  BOOST_CHECK_EQUAL((agg0[{0, 2}]), 1u); // ToR 0 - boundary
}

BOOST_AUTO_TEST_CASE(masked_ports_and_other_owners_ports_are_avoided) {
  auto m = two_pods(4);
  std::vector<rank_flow> flows{{{0, 0}, {1, 1}, 4e9}};
  auto d = aggregate_demand(m, flows);
  auto tpl = select_template(m, intent_of(fabric_stage::train_compute, {{0, 0}, {1, 1}}));
  port_usage usage(m);
  auto before = materialize_plan(m, tpl, d, usage, "job-a");
  BOOST_REQUIRE(before.plan);
  BOOST_CHECK_EQUAL(before.plan->layout.agg[0][0].circuits, 4u); // every uplink of both ToRs
  // App. H: a failed port is masked and the plan is reallocated around it.
  auto failed = m.tors[0].uplinks[1];
  m.mask(failed);
  auto after = materialize_plan(m, tpl, d, usage, "job-a", &*before.plan);
  BOOST_REQUIRE(after.plan);
  BOOST_CHECK_EQUAL(after.plan->layout.agg[0][0].circuits, 3u);
  auto ports = plan_ports(*after.plan);
  BOOST_CHECK(std::find(ports.begin(), ports.end(), failed) == ports.end());
  // Non-blocking: only the circuit on the failed port changes.
  auto diff = plan_diff(m, before.plan->circuits, after.plan->circuits);
  BOOST_REQUIRE_EQUAL(diff.size(), 1u);
  BOOST_CHECK_EQUAL(diff.begin()->second.removes.size(), 2u);
  BOOST_CHECK(diff.begin()->second.adds.empty());
  // Another owner's committed circuits are not free for this one: with no port left, its
  // demand would be stranded, so there is no plan.
  usage.claim(*after.plan);
  auto other = materialize_plan(m, tpl, d, usage, "job-b");
  BOOST_CHECK(!other.plan);
  BOOST_CHECK_NE(other.rejection.find("no circuit path"), std::string::npos);
  // And a plan made before the port failed no longer validates.
  BOOST_CHECK_NE(validate_plan(m, *before.plan, usage).find("masked"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(mfabric_regional_plan_spreads_pairs_over_numa_nodes) {
  // One PoD, three servers with 4 NICs each, all four on a regional OCS (NICs 0-1 on NUMA 0,
  // 2-3 on NUMA 1). Equal demand between every pair: two circuits per pair.
  fabric_config t;
  t.kind = fabric_kind::mfabric;
  t.link_gbps = 200;
  t.nics_per_server = 4;
  t.pods = {{"p0", {"a", "b", "c"}}};
  ocs_device reg;
  reg.id = "reg0";
  reg.tier = ocs_tier::regional;
  reg.pod = "p0";
  reg.ports = 12;
  reg.nics = {0, 1, 2, 3};
  t.ocs = {reg};
  auto m = fabric_model::build(t, {}).value;
  BOOST_REQUIRE(m);
  std::vector<demand> d{{0, 1, 100}, {0, 2, 100}, {1, 2, 100}};
  port_usage usage(*m);
  auto r = materialize_regional(*m, 0, d, usage, "moe");
  BOOST_REQUIRE_MESSAGE(r.plan, r.rejection);
  BOOST_CHECK_EQUAL(r.plan->circuits.size(), 6u);
  std::map<ocs_port, std::pair<uint32_t, int>> nic;
  for (auto& l : m->nic_links)
    nic[l.port] = {l.server, m->numa_of_nic(l.server, l.nic)};
  std::map<std::pair<uint32_t, uint32_t>, std::set<std::pair<uint32_t, int>>> numa_per_pair;
  for (auto& c : r.plan->circuits) {
    auto x = nic[{c.device, c.a}];
    auto y = nic[{c.device, c.b}];
    auto key = std::minmax(x.first, y.first);
    numa_per_pair[key].insert(x);
    numa_per_pair[key].insert(y);
  }
  // Each pair's two circuits sit on both NUMA nodes of both servers.
  for (auto& [pair, ends] : numa_per_pair)
    BOOST_CHECK_EQUAL(ends.size(), 4u);
}

BOOST_AUTO_TEST_CASE(an_mfabric_intent_is_one_regional_plan_per_pod_it_spans) {
  // Two PoDs of two 2-NIC servers, each PoD with its regional OCS; a third PoD is not used.
  fabric_config t;
  t.kind = fabric_kind::mfabric;
  t.link_gbps = 200;
  t.nics_per_server = 2;
  t.pods = {{"p0", {"a", "b"}}, {"p1", {"c", "d"}}, {"p2", {"e", "f"}}};
  for (auto [id, pod] : {std::pair{"reg0", "p0"}, std::pair{"reg1", "p1"}, std::pair{"reg2", "p2"}}) {
    ocs_device reg;
    reg.id = id;
    reg.tier = ocs_tier::regional;
    reg.pod = pod;
    reg.ports = 4;
    reg.nics = {0, 1};
    t.ocs.push_back(reg);
  }
  auto m = fabric_model::build(t, {}).value;
  BOOST_REQUIRE(m);
  // EP all-to-all inside each of PoDs 0 and 1 (servers 0-1 and 2-3, 8 GPUs each).
  fabric_intent ep{"moe", fabric_stage::train_compute, {{primitive::all_to_all, 1.0}}, {}, 1e9, 16};
  for (uint32_t s : {0u, 1u, 2u, 3u})
    for (int g = 0; g < 8; ++g)
      ep.members.push_back({s, g});
  port_usage usage(*m);
  template_cache templates;
  auto r = materialize_intent(*m, templates.get(*m, ep), ep, usage, nullptr);
  BOOST_REQUIRE_MESSAGE(r.plan, r.rejection);
  std::map<uint32_t, int> per_device;
  for (auto& c : r.plan->circuits)
    ++per_device[c.device];
  BOOST_CHECK_EQUAL(per_device.size(), 2u); // reg0 and reg1; reg2's PoD has no demand
  BOOST_CHECK_EQUAL(per_device[0], 2);      // both NICs of a and b paired
  BOOST_CHECK_EQUAL(per_device[1], 2);
  BOOST_CHECK(std::is_sorted(r.plan->circuits.begin(), r.plan->circuits.end()));
  BOOST_REQUIRE_EQUAL(r.plan->layout.agg.size(), 3u);
  BOOST_CHECK(!r.plan->layout.agg[0].empty());
  BOOST_CHECK(!r.plan->layout.agg[1].empty());
  BOOST_CHECK(r.plan->layout.agg[2].empty());
  // With PoD 1's NICs held by another owner its region gets no circuits (its traffic stays
  // on the EPS); PoD 0's region is planned as before.
  circuit_plan other;
  other.owner = "other";
  other.circuits = {{1, 1, 2}, {1, 3, 4}};
  usage.claim(other);
  auto blocked = materialize_intent(*m, templates.get(*m, ep), ep, usage, nullptr);
  BOOST_REQUIRE_MESSAGE(blocked.plan, blocked.rejection);
  for (auto& c : blocked.plan->circuits)
    BOOST_CHECK_EQUAL(c.device, 0u);
  BOOST_CHECK_EQUAL(blocked.plan->circuits.size(), 2u);
}

BOOST_AUTO_TEST_CASE(a_failed_server_is_replaced_and_only_its_circuits_move) {
  // mFabric region of four 2-NIC servers, both NICs on the regional OCS. The job runs on
  // a, b, c; c fails and the job replaces its ranks on d (RFabric §5.4 (i)).
  fabric_config t;
  t.kind = fabric_kind::mfabric;
  t.link_gbps = 200;
  t.nics_per_server = 2;
  t.pods = {{"p0", {"a", "b", "c", "d"}}};
  ocs_device reg;
  reg.id = "reg0";
  reg.tier = ocs_tier::regional;
  reg.pod = "p0";
  reg.ports = 8;
  reg.nics = {0, 1};
  t.ocs = {reg};
  auto m = *fabric_model::build(t, {}).value;
  auto ring = [&](std::vector<uint32_t> servers) {
    std::vector<rank_ref> ranks;
    for (auto sv : servers)
      ranks.push_back({sv, 0});
    return server_demand(m, 0, collective_flows({primitive::all_reduce, ranks, 1e9, {}}));
  };
  port_usage usage(m);
  auto before = materialize_regional(m, 0, ring({0, 1, 2}), usage, "job");
  BOOST_REQUIRE(before.plan);
  m.fail_server(2);
  auto after = materialize_regional(m, 0, ring({0, 1, 3}), usage, "job", &*before.plan);
  BOOST_REQUIRE_MESSAGE(after.plan, after.rejection);
  std::set<uint32_t> used_servers;
  for (auto& p : plan_ports(*after.plan))
    used_servers.insert(m.nic_links[m.role(p).index].server);
  BOOST_CHECK((used_servers == std::set<uint32_t>{0, 1, 3}));
  // The a-b circuit stays on its ports; only c's circuits go and d's come.
  auto diff = plan_diff(m, before.plan->circuits, after.plan->circuits);
  BOOST_REQUIRE_EQUAL(diff.size(), 1u);
  auto& d = diff.begin()->second;
  BOOST_CHECK_EQUAL(d.removes.size(), d.adds.size());
  BOOST_CHECK_LT(d.removes.size(), 2 * before.plan->circuits.size());
  for (auto& x : d.removes) // each removed circuit had an end on c (ports 5, 6)
    BOOST_CHECK(x.in == 5 || x.in == 6 || x.out - 8 == 5 || x.out - 8 == 6);
}

BOOST_AUTO_TEST_CASE(a_regional_plan_is_never_slower_than_the_volume_blind_split) {
  // 8 servers with 6 of 8 NICs on the regional OCS: fewer NICs than peers. A skewed
  // all-to-all (server s sends in proportion to 1 / (rank of the peer)^1.5) drives Alg. 1 to
  // spend each server's NICs on its heaviest peers; the plan Loom keeps must carry the
  // demand at least as fast as Alg. 1 on the same pairs at equal volumes (the static split).
  for (auto [servers, nics] : {std::pair{8, 6}, std::pair{16, 8}, std::pair{8, 4}}) {
    auto region = make_mfabric_region({servers, 8, nics});
    auto m = *fabric_model::build(region.config, region.nodes).value;
    std::vector<demand> skewed, flat;
    for (uint32_t a = 0; a < uint32_t(servers); ++a)
      for (uint32_t b = 0; b < uint32_t(servers); ++b)
        if (a != b) {
          uint32_t rank = (b + uint32_t(servers) - a) % uint32_t(servers);
          skewed.push_back({a, b, 1e9 / std::pow(double(rank), 1.5)});
          flat.push_back({a, b, 1});
        }
    port_usage usage(m);
    auto planned = materialize_regional(m, 0, skewed, usage, "moe");
    auto blind = materialize_regional(m, 0, flat, usage, "moe");
    BOOST_REQUIRE_MESSAGE(planned.plan, planned.rejection);
    BOOST_REQUIRE_MESSAGE(blind.plan, blind.rejection);
    std::vector<rank_flow> flows;
    for (auto& d : skewed)
      flows.push_back({{d.from, 0}, {d.to, 0}, d.bytes});
    double t_planned = fabric_network(m, planned.plan->layout).completion_s(flows);
    double t_blind = fabric_network(m, blind.plan->layout).completion_s(flows);
    BOOST_TEST_MESSAGE(servers << " servers x " << nics << " OCS NICs: planned " << t_planned
                               << " s, blind " << t_blind << " s");
    BOOST_CHECK(std::isfinite(t_planned));
    BOOST_CHECK_LE(t_planned, t_blind * (1 + 1e-9));
  }
}

BOOST_AUTO_TEST_SUITE_END()
