#define BOOST_TEST_MODULE fabric
#include <boost/test/unit_test.hpp>

#include <limits>

#include "fabric/allocate.hpp"
#include "fabric/hop_refine.hpp"

using namespace loom;

BOOST_AUTO_TEST_SUITE(circuit_allocation)

BOOST_AUTO_TEST_CASE(pair_time_is_equation_7) {
  BOOST_CHECK_EQUAL(pair_time(0, 0, 0, 1), 0.0);
  BOOST_CHECK_EQUAL(pair_time(5, 0, 0, 1), std::numeric_limits<double>::infinity());
  BOOST_CHECK_EQUAL(pair_time(100, 300, 2, 50), 3.0); // the slower direction, 300 / (2 x 50)
}

BOOST_AUTO_TEST_CASE(every_demanded_pair_is_served_before_any_gets_a_second_circuit) {
  // A = 0 has two ports; A-B wants 10x more than A-C. The infinite rule still gives A-C its
  // circuit before A-B gets a second one (the larger demand goes first among the infinite).
  auto r = allocate_circuits({2, 2, 2}, {{0, 1, 1000}, {0, 2, 100}}, 1.0);
  BOOST_CHECK_EQUAL(r.circuits_between(0, 1), 1u);
  BOOST_CHECK_EQUAL(r.circuits_between(0, 2), 1u);
  BOOST_CHECK_EQUAL(r.free_ports[0], 0u);
  // With one port at A, only the larger demand wins the tie among infinite pairs.
  auto one = allocate_circuits({1, 2, 2}, {{0, 2, 100}, {0, 1, 1000}}, 1.0);
  BOOST_CHECK_EQUAL(one.circuits_between(0, 1), 1u);
  BOOST_CHECK_EQUAL(one.circuits_between(0, 2), 0u);
}

BOOST_AUTO_TEST_CASE(bottleneck_greedy_by_hand) {
  // deg(A) = 4. Steps: A-B (inf, 300), A-C (inf, 100), A-B (300 > 100), A-B (150 > 100).
  auto r = allocate_circuits({4, 4, 4}, {{0, 1, 300}, {2, 0, 100}}, 1.0);
  BOOST_CHECK_EQUAL(r.circuits_between(1, 0), 3u);
  BOOST_CHECK_EQUAL(r.circuits_between(0, 2), 1u);
  BOOST_CHECK_EQUAL(r.steps, 4u);
  // Finite ties go to the larger directional demand too. A-B 200, A-C 100, deg(A) = 10:
  // inf, inf, 200 -> AB2, tie 100|100 -> AB3, 100 -> AC2, 66.7 -> AB4, tie 50|50 -> AB5,
  // 50 -> AC3, 40 -> AB6, tie 33.3|33.3 -> AB7. Breaking ties the other way gives 6 and 4.
  auto tie = allocate_circuits({10, 10, 10}, {{0, 1, 200}, {0, 2, 100}}, 1.0);
  BOOST_CHECK_EQUAL(tie.circuits_between(0, 1), 7u);
  BOOST_CHECK_EQUAL(tie.circuits_between(0, 2), 3u);
  // A port-starved endpoint drops out: B has one port, so A-B stops at one circuit.
  auto starved = allocate_circuits({4, 1, 4}, {{0, 1, 300}, {0, 2, 200}, {2, 0, 100}}, 1.0);
  BOOST_CHECK_EQUAL(starved.circuits_between(0, 1), 1u);
  BOOST_CHECK_EQUAL(starved.circuits_between(0, 2), 3u);
}

BOOST_AUTO_TEST_CASE(both_directions_count_on_a_full_duplex_circuit) {
  // B -> A dominates: the pair's time is set by the heavier direction.
  auto r = allocate_circuits({3, 3, 3}, {{0, 1, 100}, {1, 0, 600}, {0, 2, 250}}, 1.0);
  // inf(600) A-B, inf(250) A-C, then 600 > 250 -> A-B again.
  BOOST_CHECK_EQUAL(r.circuits_between(0, 1), 2u);
  BOOST_CHECK_EQUAL(r.circuits_between(0, 2), 1u);
}

BOOST_AUTO_TEST_CASE(port_budgets_and_eligibility) {
  std::vector<uint32_t> ports{3, 5, 2, 4};
  std::vector<demand> d{{0, 1, 50}, {1, 2, 70}, {2, 3, 10}, {3, 0, 90}, {1, 3, 40}, {0, 2, 5}};
  auto no_0_2 = [](uint32_t a, uint32_t b) { return !(a == 0 && b == 2); };
  auto r = allocate_circuits(ports, d, 1.0, no_0_2);
  BOOST_CHECK_EQUAL(r.circuits_between(0, 2), 0u); // ineligible despite its demand
  std::vector<uint32_t> used(4, 0);
  for (auto& c : r.circuits) {
    used[c.a] += c.circuits;
    used[c.b] += c.circuits;
  }
  for (size_t v = 0; v < ports.size(); ++v) {
    BOOST_CHECK_LE(used[v], ports[v]);
    BOOST_CHECK_EQUAL(used[v] + r.free_ports[v], ports[v]);
  }
  BOOST_CHECK_LE(r.steps, (3u + 5 + 2 + 4) / 2);
  // It stops only when no demanded eligible pair has a free port at both ends.
  for (auto& x : d) {
    if (!no_0_2(std::min(x.from, x.to), std::max(x.from, x.to)))
      continue;
    BOOST_CHECK(r.free_ports[x.from] == 0 || r.free_ports[x.to] == 0);
  }
}

BOOST_AUTO_TEST_CASE(pairs_without_demand_get_nothing) {
  auto r = allocate_circuits({8, 8, 8}, {{0, 1, 10}}, 1.0);
  BOOST_CHECK_EQUAL(r.circuits_between(0, 1), 8u);
  BOOST_CHECK_EQUAL(r.circuits_between(1, 2), 0u);
  BOOST_CHECK_EQUAL(r.free_ports[2], 8u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(multi_hop_refinement)

namespace {

std::vector<uint32_t> degrees(uint32_t n, const std::vector<circuit_count>& circuits) {
  std::vector<uint32_t> deg(n, 0);
  for (auto& c : circuits) {
    deg[c.a] += c.circuits;
    deg[c.b] += c.circuits;
  }
  return deg;
}

/// Every ordered pair of n endpoints wants `bytes`.
std::vector<demand> all_to_all(uint32_t n, double bytes) {
  std::vector<demand> d;
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = 0; b < n; ++b)
      if (a != b)
        d.push_back({a, b, bytes});
  return d;
}

} // namespace

BOOST_AUTO_TEST_CASE(congestion_routes_over_shortest_paths_split_by_circuits) {
  // A ring 0-1-2-3-0 with 0-1 doubled: 0 -> 2 has two 2-hop paths, via 1 and via 3; 0 splits
  // 120 bytes 2:1 by circuits (80 via 1, 40 via 3), and 1 -> 2 has one circuit of 10 B/s.
  std::vector<circuit_count> ring{{0, 1, 2}, {1, 2, 1}, {2, 3, 1}, {0, 3, 1}};
  auto c = congestion(4, ring, {{0, 2, 120}}, 10.0);
  BOOST_CHECK_EQUAL(c.unreachable, 0u);
  BOOST_CHECK_CLOSE(c.worst_s, 8.0, 1e-9);
  // The squared times of the four loaded directions: 80/20, 80/10, 40/10, 40/10.
  BOOST_CHECK_CLOSE(c.spread, 16.0 + 64 + 16 + 16, 1e-9);
  // 0 -> 1 rides its own two circuits only: 30 bytes over 2 x 10 B/s.
  BOOST_CHECK_CLOSE(congestion(4, ring, {{0, 1, 30}}, 10.0).worst_s, 1.5, 1e-9);
  // Two islands: the demand across them is unreachable, and that ranks worse than any load.
  std::vector<circuit_count> islands{{0, 1, 1}, {2, 3, 1}};
  auto split = congestion(4, islands, {{0, 3, 1}, {0, 1, 1000}}, 1.0);
  BOOST_CHECK_EQUAL(split.unreachable, 1u);
  BOOST_CHECK(congestion(4, ring, {{0, 3, 1}, {0, 1, 1000}}, 1.0) < split);
}

BOOST_AUTO_TEST_CASE(congestion_past_64_endpoints_and_however_circuits_are_listed) {
  // A ring of 130 (neighbour sets over three words): 0 -> 65 has two 65-hop paths and splits
  // at 0, every direction on them carrying half; 0 -> 64 has one path and carries it all.
  const uint32_t n = 130;
  std::vector<circuit_count> ring;
  for (uint32_t v = 0; v < n; ++v)
    ring.push_back({std::min(v, (v + 1) % n), std::max(v, (v + 1) % n), 1});
  auto split = congestion(n, ring, {{0, 65, 130}}, 1.0);
  BOOST_CHECK_EQUAL(split.unreachable, 0u);
  BOOST_CHECK_EQUAL(split.worst_s, 65.0);
  BOOST_CHECK_EQUAL(split.spread, 130 * 65.0 * 65.0);
  auto one = congestion(n, ring, {{0, 64, 10}}, 1.0);
  BOOST_CHECK_EQUAL(one.worst_s, 10.0);
  BOOST_CHECK_EQUAL(one.spread, 64 * 100.0);
  // Listed in another order, ends swapped, a doubled pair over two entries: the same graph,
  // the same figures to the last bit.
  std::vector<circuit_count> chords = ring;
  for (uint32_t v = 0; v < n; v += 7)
    chords.push_back({v, (v * 31 + 17) % n == v ? (v + 2) % n : (v * 31 + 17) % n, 2});
  for (auto& c : chords)
    if (c.a > c.b)
      std::swap(c.a, c.b);
  auto demands = all_to_all(n, 3);
  auto listed = congestion(n, chords, demands, 1.0);
  std::vector<circuit_count> shuffled(chords.rbegin(), chords.rend());
  for (auto& c : shuffled)
    std::swap(c.a, c.b);
  shuffled.front().circuits = 1; // a chord of 2 circuits, now over two entries
  shuffled.push_back(shuffled.front());
  auto relisted = congestion(n, shuffled, demands, 1.0);
  BOOST_CHECK_EQUAL(relisted.unreachable, listed.unreachable);
  BOOST_CHECK_EQUAL(relisted.worst_s, listed.worst_s);
  BOOST_CHECK_EQUAL(relisted.spread, listed.spread);
  BOOST_CHECK(congestion(n, ring, demands, 1.0) > listed); // chords shorten every path
}

BOOST_AUTO_TEST_CASE(refinement_keeps_ports_and_joins_what_talks) {
  // Two 4-cycles, each endpoint with 2 ports, under an all-to-all over all 8: half the demand
  // cannot move. Swaps keep every endpoint's port count and join the cycles.
  const uint32_t n = 8;
  std::vector<circuit_count> two_cycles{{0, 1, 1}, {1, 2, 1}, {2, 3, 1}, {0, 3, 1},
                                        {4, 5, 1}, {5, 6, 1}, {6, 7, 1}, {4, 7, 1}};
  auto demands = all_to_all(n, 10);
  auto before = congestion(n, two_cycles, demands, 1.0);
  BOOST_CHECK_GT(before.unreachable, 0u);
  auto after = refine_for_hops(n, two_cycles, demands, 1.0);
  BOOST_CHECK(degrees(n, after) == degrees(n, two_cycles));
  auto score = congestion(n, after, demands, 1.0);
  BOOST_CHECK_EQUAL(score.unreachable, 0u);
  BOOST_CHECK(score < before);
  // The same input gives the same circuits.
  auto again = refine_for_hops(n, two_cycles, demands, 1.0);
  BOOST_REQUIRE_EQUAL(again.size(), after.size());
  for (size_t i = 0; i < after.size(); ++i)
    BOOST_CHECK(again[i].a == after[i].a && again[i].b == after[i].b
                && again[i].circuits == after[i].circuits);
}

BOOST_AUTO_TEST_CASE(refinement_beats_direct_greedy_when_ports_are_fewer_than_peers) {
  // 16 endpoints with 4 ports under a skewed all-to-all (App. I's EP64 over rail ToRs): Alg. 3
  // sizes circuits for the heavy pairs it can reach directly; the rest ride multi-hop.
  const uint32_t n = 16;
  std::vector<demand> demands;
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = 0; b < n; ++b)
      if (a != b)
        demands.push_back({a, b, 100.0 * (1 + (b % 4 == 0 ? 3 : 0))}); // every 4th is hot
  auto greedy = allocate_circuits(std::vector<uint32_t>(n, 4), demands, 1.0).circuits;
  auto refined = refine_for_hops(n, greedy, demands, 1.0);
  BOOST_CHECK(degrees(n, refined) == degrees(n, greedy));
  auto g = congestion(n, greedy, demands, 1.0);
  auto r = congestion(n, refined, demands, 1.0);
  BOOST_CHECK_EQUAL(r.unreachable, 0u);
  BOOST_CHECK_LT(r.worst_s, g.worst_s);
  // Swaps that would close a loop on one endpoint or break eligibility are never made.
  auto odd_even = [](uint32_t a, uint32_t b) { return (a + b) % 2 == 1; };
  std::vector<circuit_count> bipartite;
  for (uint32_t a = 0; a < n; a += 2)
    for (uint32_t k = 1; k <= 3; k += 2)
      bipartite.push_back({a, (a + k) % n, 1});
  for (auto& c : refine_for_hops(n, bipartite, demands, 1.0, odd_even)) {
    BOOST_CHECK(c.a != c.b);
    BOOST_CHECK(odd_even(c.a, c.b));
  }
}

BOOST_AUTO_TEST_SUITE_END()

#include <random>

namespace {

/// Algorithm 3 as printed: recompute the argmax over every eligible demanded pair each step.
std::vector<circuit_count> literal_algorithm_3(const std::vector<uint32_t>& ports,
                                               const std::vector<demand>& demands) {
  const uint32_t n = static_cast<uint32_t>(ports.size());
  std::vector<std::vector<double>> d(n, std::vector<double>(n, 0.0));
  for (auto& x : demands)
    d[x.from][x.to] += x.bytes;
  std::vector<std::vector<uint32_t>> c(n, std::vector<uint32_t>(n, 0));
  auto p = ports;
  for (;;) {
    bool found = false;
    uint32_t bu = 0;
    uint32_t bv = 0;
    double bt = -1;
    double bd = -1;
    uint64_t btie = 0;
    for (uint32_t u = 0; u < n; ++u)
      for (uint32_t v = u + 1; v < n; ++v) {
        if (p[u] == 0 || p[v] == 0 || d[u][v] + d[v][u] <= 0)
          continue;
        double t = pair_time(d[u][v], d[v][u], c[u][v], 1.0);
        double dir = std::max(d[u][v], d[v][u]);
        // Full ties: the smaller SplitMix64 scramble of the pair (the implementation's order).
        auto scramble = [](uint64_t x) {
          x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
          x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
          return x ^ (x >> 31);
        };
        uint64_t tie = scramble(uint64_t{u} << 32 | v);
        if (!found || t > bt || (t == bt && dir > bd) || (t == bt && dir == bd && tie < btie)) {
          btie = tie;
          found = true;
          bt = t;
          bd = dir;
          bu = u;
          bv = v;
        }
      }
    if (!found)
      break;
    ++c[bu][bv];
    --p[bu];
    --p[bv];
  }
  std::vector<circuit_count> out;
  for (uint32_t u = 0; u < n; ++u)
    for (uint32_t v = u + 1; v < n; ++v)
      if (c[u][v] > 0)
        out.push_back({u, v, c[u][v]});
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(same_choices_as_the_literal_algorithm) {
  std::mt19937_64 rng{17};
  for (int trial = 0; trial < 200; ++trial) {
    uint32_t n = 2 + static_cast<uint32_t>(rng() % 10);
    std::vector<uint32_t> ports(n);
    for (auto& p : ports)
      p = static_cast<uint32_t>(rng() % 6);
    std::vector<demand> demands;
    for (int k = 0; k < 3 * static_cast<int>(n); ++k) {
      auto u = static_cast<uint32_t>(rng() % n);
      auto v = static_cast<uint32_t>(rng() % n);
      if (u != v) // small integers: plenty of exact ties
        demands.push_back({u, v, static_cast<double>(1 + rng() % 4) * 100});
    }
    auto fast = allocate_circuits(ports, demands, 1.0);
    BOOST_TEST_CONTEXT("trial " << trial) {
      BOOST_CHECK(fast.circuits == literal_algorithm_3(ports, demands));
    }
  }
}

// Dense demand among 100 endpoints with tens of ports each: the fast path's matrix, and pairs
// ranked a band at a time over several bands (every pair demanded, so most are never served).
BOOST_AUTO_TEST_CASE(same_choices_as_the_literal_algorithm_over_dense_demand) {
  std::mt19937_64 rng{29};
  for (int trial = 0; trial < 4; ++trial) {
    const uint32_t n = 100;
    std::vector<uint32_t> ports(n);
    for (auto& p : ports)
      p = 20 + static_cast<uint32_t>(rng() % 41);
    std::vector<demand> demands;
    std::uniform_real_distribution<double> bytes{1e6, 1e9};
    for (uint32_t u = 0; u < n; ++u)
      for (uint32_t v = 0; v < n; ++v)
        if (u != v) // odd trials: a few volumes only, so most pairs tie
          demands.push_back({u, v, trial % 2 ? double(1 + rng() % 3) * 100 : bytes(rng)});
    auto fast = allocate_circuits(ports, demands, 1.0);
    BOOST_TEST_CONTEXT("trial " << trial) {
      BOOST_CHECK(fast.circuits == literal_algorithm_3(ports, demands));
    }
  }
}

#include <map>
#include <set>

#include "fabric/broadcast.hpp"

BOOST_AUTO_TEST_SUITE(weight_sync_broadcast)

namespace {

// Two shard holders in PoD 0 (Train); eight Gen receivers in each of PoDs 1-3; d_p = 2.
struct sync_setup {
  std::vector<endpoint_ref> holders{{0, 0}, {1, 0}};
  std::vector<endpoint_ref> receivers;
  broadcast_params p;
  sync_setup() {
    for (uint32_t pod = 1; pod <= 3; ++pod)
      for (uint32_t i = 0; i < 8; ++i)
        receivers.push_back({100 * pod + i, pod});
    p.shard_bytes = 10e9;
    p.core_link_bytes_per_s = 25e9;
    p.intra_link_bytes_per_s = 25e9;
    p.pod_budget = {2, 2, 2, 2};
  }
};

void check_budgets(const broadcast_plan& plan, const std::vector<uint32_t>& budget) {
  for (auto& wave : plan.waves) {
    std::map<uint32_t, uint32_t> incident;
    for (auto& e : wave) {
      BOOST_CHECK_NE(e.from.pod, e.to.pod);
      BOOST_CHECK_GE(e.circuits, 1u);
      incident[e.from.pod] += e.circuits;
      incident[e.to.pod] += e.circuits;
    }
    for (auto& [pod, n] : incident)
      BOOST_CHECK_LE(n, budget[pod]);
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(two_level_forest_respects_every_budget_and_reaches_everyone) {
  sync_setup s;
  auto plan = plan_broadcast(s.holders, s.receivers, s.p);
  BOOST_REQUIRE(plan.feasible);
  check_budgets(plan, s.p.pod_budget);
  BOOST_CHECK_EQUAL(plan.seeds.size(), 3u); // one per destination PoD
  // PoD 0 can carry two circuits at once: seeds of PoDs 1 and 2 in wave 1, PoD 3 in wave 2,
  // where the spare budget doubles its edge: T_A = S/B + S/(2B).
  BOOST_REQUIRE_EQUAL(plan.waves.size(), 2u);
  BOOST_CHECK_EQUAL(plan.waves[1].front().circuits, 2u);
  BOOST_CHECK_CLOSE(plan.phase_a_s, 10e9 / 25e9 * 1.5, 1e-9);
  // Every receiver gets the shard exactly once, from a holder or an endpoint reached before.
  std::set<uint32_t> reached{0, 1};
  std::set<uint32_t> seen;
  for (auto& [child, parent] : plan.parent) {
    BOOST_CHECK(reached.count(parent));
    BOOST_CHECK(seen.insert(child).second);
    reached.insert(child);
  }
  BOOST_CHECK_EQUAL(seen.size(), s.receivers.size());
}

BOOST_AUTO_TEST_CASE(forest_beats_flat_and_one_copy_over_a_slow_link) {
  sync_setup s;
  auto forest = plan_broadcast(s.holders, s.receivers, s.p);
  auto flat = plan_flat_broadcast(s.holders, s.receivers, s.p);
  check_budgets(flat, s.p.pod_budget);
  // Flat: 24 inter-PoD edges through PoD 0's two circuits: 12 waves of S/B.
  BOOST_CHECK_EQUAL(flat.waves.size(), 12u);
  BOOST_CHECK_CLOSE(flat.total_s(), 12 * 10e9 / 25e9, 1e-9);
  double weave = one_copy_then_broadcast_s(s.receivers.size(), 20e9 / 8, s.p); // 20 Gbps link
  BOOST_TEST_MESSAGE("10 GB shard to 24 ranks in 3 PoDs: forest " << forest.total_s()
                                                                  << " s, flat " << flat.total_s()
                                                                  << " s, one copy + broadcast "
                                                                  << weave << " s");
  BOOST_CHECK_LT(forest.total_s(), flat.total_s());
  BOOST_CHECK_LT(forest.total_s(), weave);
}

BOOST_AUTO_TEST_CASE(more_budget_fewer_waves_and_a_pod_without_budget_is_infeasible) {
  sync_setup s;
  s.p.pod_budget = {8, 8, 8, 8};
  auto roomy = plan_broadcast(s.holders, s.receivers, s.p);
  BOOST_CHECK_EQUAL(roomy.waves.size(), 1u);
  check_budgets(roomy, s.p.pod_budget);
  s.p.pod_budget = {2, 2, 0, 2};
  BOOST_CHECK(!plan_broadcast(s.holders, s.receivers, s.p).feasible);
}

BOOST_AUTO_TEST_SUITE_END()

#include "drivers/xc_table.hpp"
#include "fabric/topo_id.hpp"

BOOST_AUTO_TEST_SUITE(opus_topo_id)

namespace {

// Opus Fig. 8: PP = 3 (asymmetrical), DP = 2 (digit 1), CP = 2 (digit 2): 12 ranks, 4 a stage.
const opus_layout fig8{3, {2, 2}};

std::vector<int> stages(std::initializer_list<int> s) {
  return s;
}

/// The whole rail mapping, checked against the cross-connect model on a 12 x 12 switch.
xc_diff whole_mapping(const topo_id& id) {
  xc_diff d;
  for (int s = 0; s < id.stages(); ++s)
    for (auto& x : submapping(fig8, id, s))
      d.adds.push_back(x);
  return d;
}

} // namespace

BOOST_AUTO_TEST_CASE(encoding) {
  auto all_dp = topo_id::uniform(3, 1);
  BOOST_CHECK_EQUAL(all_dp.str(), "111");
  BOOST_CHECK_EQUAL(all_dp.value(), 111u);
  auto pp01 = topo_id::parse("001");
  BOOST_CHECK_EQUAL(pp01.value(), 1u);
  BOOST_CHECK_EQUAL(pp01.digit(2), 1);
  BOOST_CHECK_THROW(topo_id::parse("0x1"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(figure_8_transitions_reprogram_only_affected_stages) {
  auto all_dp = topo_id::parse("111");
  auto pp01 = topo_id::parse("001");
  // The paper's example: stages 0 and 1 switch to PP Send/Recv, stage 2 stays on DP.
  BOOST_CHECK(stages_to_reprogram(all_dp, pp01) == stages({0, 1}));
  // Symmetrical-symmetrical on one stage: only that stage.
  BOOST_CHECK(stages_to_reprogram(all_dp, topo_id::parse("112")) == stages({2}));
  // Asymmetrical-to-symmetrical at stage 0: stage 0 and the stage it was connected to.
  BOOST_CHECK(stages_to_reprogram(pp01, topo_id::parse("101")) == stages({0, 1}));
  // Stage 2 joins the pipeline: stage 1 now sends on to 2, stage 0 is untouched.
  BOOST_CHECK(stages_to_reprogram(pp01, topo_id::parse("000")) == stages({1, 2}));
  // O1: no change, no reconfiguration.
  BOOST_CHECK(stages_to_reprogram(pp01, pp01).empty());
}

BOOST_AUTO_TEST_CASE(submappings_build_rings_per_group_and_pp_links) {
  auto all_dp = topo_id::parse("111");
  auto dp = submapping(fig8, all_dp, 0);
  BOOST_REQUIRE_EQUAL(dp.size(), 4u); // N_rank / P_asym ports per stage
  for (auto& x : dp) {
    int from = int(x.in) - 1;
    int to = int(x.out) - 12 - 1;
    auto a = fig8.coordinates(from % 4);
    auto b = fig8.coordinates(to % 4);
    BOOST_CHECK_EQUAL(from / 4, 0);
    BOOST_CHECK_EQUAL(to / 4, 0);
    BOOST_CHECK_NE(a[0], b[0]);   // DP ring: the DP coordinate moves
    BOOST_CHECK_EQUAL(a[1], b[1]); // within the same CP group
  }
  auto cp = submapping(fig8, topo_id::parse("222"), 1);
  for (auto& x : cp) {
    auto a = fig8.coordinates((int(x.in) - 1) % 4);
    auto b = fig8.coordinates((int(x.out) - 13) % 4);
    BOOST_CHECK_EQUAL(a[0], b[0]);
    BOOST_CHECK_NE(a[1], b[1]);
  }
  auto pp01 = topo_id::parse("001");
  auto pp = submapping(fig8, pp01, 0);
  BOOST_REQUIRE_EQUAL(pp.size(), 4u);
  for (auto& x : pp)
    BOOST_CHECK_EQUAL(int(x.out) - 13, int(x.in) - 1 + 4); // rank i of stage 0 -> of stage 1
  // Three PP stages form one ring: stage 2 sends back to stage 0.
  for (auto& x : submapping(fig8, topo_id::parse("000"), 2))
    BOOST_CHECK_EQUAL(int(x.out) - 13, int(x.in) - 1 - 8);
  // A PP stage without a PP neighbour has nothing to wire.
  BOOST_CHECK(submapping(fig8, topo_id::parse("101"), 1).empty());
  // Every topo_id yields a rail mapping the cross-connect model accepts.
  for (auto id : {"111", "001", "222", "000", "121", "101"}) {
    xc_table rail{{12, 12}};
    BOOST_CHECK_MESSAGE(!rail.check(whole_mapping(topo_id::parse(id))), id);
  }
}

BOOST_AUTO_TEST_SUITE_END()

#include "fabric/rail_orchestrator.hpp"

BOOST_AUTO_TEST_SUITE(opus_rail_orchestration)

namespace {

const opus_layout fig8_rail{3, {2, 2}};

std::vector<uint64_t> writers_of(const std::vector<rail_acks>& acks) {
  std::vector<uint64_t> out;
  for (auto& a : acks)
    out.insert(out.end(), a.writers.begin(), a.writers.end());
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(writers_are_answered_only_after_their_transition_is_applied) {
  rail_orchestrator rails{fig8_rail, topo_id::parse("111"), 2};
  // Stages 0 and 1 go to PP Send/Recv: the barrier waits for both writers (tokens 10, 11).
  auto first = rails.write({"pp0-1", 7, 2, 0, 0}, 10);
  BOOST_CHECK(!first.transition);
  auto second = rails.write({"pp0-1", 7, 2, 1, 0}, 11);
  BOOST_REQUIRE(second.transition);
  BOOST_CHECK(second.acks.empty()); // G1: not before the rail is reprogrammed
  auto* t = rails.start();
  BOOST_REQUIRE(t);
  BOOST_CHECK(t->reprogram == (std::vector<int>{0, 1}));
  BOOST_CHECK(!rails.start()); // one transition at a time
  // Its diff touches only the reprogrammed stages' cross-connects on a 12 x 12 rail.
  auto diff = rails.diff(*t, 12);
  BOOST_CHECK_EQUAL(diff.removes.size(), 8u);
  BOOST_CHECK_EQUAL(diff.adds.size(), 8u);
  auto done = rails.finish(true);
  BOOST_CHECK(!done.retry && !done.fell_back);
  BOOST_CHECK(writers_of(done.acks) == (std::vector<uint64_t>{10, 11}));
  BOOST_CHECK_EQUAL(done.acks.front().ack.topo, "001");
  BOOST_CHECK_EQUAL(rails.current().str(), "001");
}

BOOST_AUTO_TEST_CASE(o1_is_immediate_unless_a_pending_transition_touches_its_stage) {
  rail_orchestrator rails{fig8_rail, topo_id::parse("111"), 2};
  // Stage 2 changes to CP (digit 2): queued and started.
  rails.write({"dp2", 0, 1, 2, 2}, 1);
  BOOST_REQUIRE(rails.start());
  // Stage 0 asks for DP, which it has: O1, nothing pending touches it, answered now.
  auto o1 = rails.write({"dp0", 0, 1, 0, 1}, 2);
  BOOST_CHECK(writers_of(o1.acks) == std::vector<uint64_t>{2});
  BOOST_CHECK_EQUAL(o1.acks.front().ack.topo, "111"); // stage 2 is still being applied
  // Stage 2 asks for CP, which the applying transition gives it: it waits for that one.
  auto waiting = rails.write({"dp2", 1, 1, 2, 2}, 3);
  BOOST_REQUIRE(waiting.transition);
  BOOST_CHECK(waiting.transition->reprogram.empty());
  BOOST_CHECK(waiting.acks.empty());
  auto done = rails.finish(true);
  BOOST_CHECK(writers_of(done.acks) == (std::vector<uint64_t>{1, 3}));
  BOOST_CHECK_EQUAL(rails.queued(), 0u);
  BOOST_CHECK_EQUAL(rails.current().str(), "112");
}

BOOST_AUTO_TEST_CASE(g2_holds_a_transition_while_its_stage_is_busy) {
  rail_orchestrator rails{fig8_rail, topo_id::parse("111"), 2};
  rails.write({"dp1", 0, 1, 1, 2}, 1);
  bool busy = true;
  BOOST_CHECK(!rails.start([&](int stage) { return busy && stage == 1; }));
  busy = false;
  BOOST_CHECK(rails.start([&](int stage) { return busy && stage == 1; }));
}

// Opus §7: a second job on the same rail uses ports of its own; its mapping (and its giant
// ring) is the first job's shifted by its offset, on inputs and outputs alike.
BOOST_AUTO_TEST_CASE(a_job_from_port_13_maps_onto_its_own_ports_only) {
  rail_orchestrator low{fig8_rail, topo_id::parse("111"), 0};
  rail_orchestrator high{fig8_rail, topo_id::parse("111"), 0, 13};
  BOOST_CHECK_EQUAL(high.first_port(), 13u);
  auto a = low.mapping(24), b = high.mapping(24);
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  BOOST_REQUIRE(!a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_CHECK_EQUAL(b[i].in, a[i].in + 12);
    BOOST_CHECK_EQUAL(b[i].out, a[i].out + 12);
    BOOST_CHECK(b[i].in >= 13 && b[i].in <= 24 && b[i].out >= 24 + 13);
  }
  BOOST_CHECK(high.carried(24) == b);
  // Fallen back (no retries): it carries the ring over its own twelve ports.
  high.write({"dp1", 0, 1, 1, 2}, 1);
  BOOST_REQUIRE(high.start());
  BOOST_CHECK(high.finish(false).fell_back);
  auto ring = high.carried(24);
  BOOST_REQUIRE_EQUAL(ring.size(), 12u);
  for (auto& x : ring)
    BOOST_CHECK_EQUAL(x.out - 24 - 12, (x.in - 12) % 12 + 1);
}

BOOST_AUTO_TEST_CASE(a_failing_rail_is_retried_then_falls_back_to_the_giant_ring) {
  rail_orchestrator rails{fig8_rail, topo_id::parse("111"), 2};
  rails.write({"dp1", 0, 1, 1, 2}, 1);
  rails.write({"dp2", 0, 1, 2, 2}, 2); // queued behind the first
  for (int attempt = 1; attempt <= 2; ++attempt) {
    BOOST_REQUIRE(rails.start());
    auto r = rails.finish(false);
    BOOST_CHECK(r.retry);
    BOOST_CHECK_EQUAL(r.attempts, attempt);
    BOOST_CHECK(r.acks.empty());
  }
  BOOST_REQUIRE(rails.start());
  auto ring = rails.giant_ring_diff(12); // what the rail carries now -> the ring
  auto r = rails.finish(false);
  BOOST_CHECK(r.fell_back);
  BOOST_CHECK(writers_of(r.acks) == (std::vector<uint64_t>{1, 2}));
  for (auto& a : r.acks)
    BOOST_CHECK(a.ack.fallback);
  BOOST_CHECK_EQUAL(rails.current().str(), "111"); // nothing was confirmed
  // The ring sends rank r to r + 1 over all 12 ranks; it replaces the three DP sub-mappings.
  BOOST_CHECK_EQUAL(ring.adds.size(), 12u);
  for (auto& x : ring.adds)
    BOOST_CHECK_EQUAL(x.out - 12, x.in % 12 + 1);
  BOOST_CHECK_EQUAL(ring.removes.size(), 12u);
  // From now on every write is served by the ring, at once.
  rails.write({"pp0-1", 0, 2, 0, 0}, 3);
  auto late = rails.write({"pp0-1", 0, 2, 1, 0}, 4);
  BOOST_CHECK(writers_of(late.acks) == (std::vector<uint64_t>{3, 4}));
  BOOST_CHECK(late.acks.front().ack.fallback);
  BOOST_CHECK(!rails.start());
}

BOOST_AUTO_TEST_SUITE_END()


#include "loom/opus_shim.hpp"

BOOST_AUTO_TEST_SUITE(opus_shim)

BOOST_AUTO_TEST_CASE(the_phase_table_decides_which_collectives_write) {
  // Stage 0 of a PP x FSDP step: all-gather, send activation, receive gradient, all-gather,
  // reduce-scatter. Steps repeat: the reduce-scatter's phase runs into the next all-gather.
  opus_shim_policy on_demand{opus_shim_mode::on_demand};
  BOOST_CHECK(on_demand.write_before(3, true)); // not profiled: every collective writes
  on_demand.set_table({1, 0, 0, 1, 1});
  std::vector<bool> starts, ends;
  for (size_t k = 0; k < 5; ++k) {
    starts.push_back(on_demand.starts_phase(k));
    ends.push_back(on_demand.ends_phase(k));
  }
  BOOST_CHECK((starts == std::vector<bool>{false, true, false, true, false}));
  BOOST_CHECK((ends == std::vector<bool>{true, false, true, false, false}));
  // On demand: PP always, a phase's first collective, and whatever is not served (O1 spares
  // the rest); nothing is written ahead.
  std::vector<bool> before;
  for (size_t k = 0; k < 5; ++k)
    before.push_back(on_demand.write_before(k, true));
  BOOST_CHECK((before == std::vector<bool>{false, true, true, true, false}));
  BOOST_CHECK(on_demand.write_before(4, false));
  BOOST_CHECK(!on_demand.write_after(0));
  // Provisioning: a phase's first collective is written ahead (after the one before it, or
  // after any PP one), so before it only PP and the unserved write.
  opus_shim_policy ahead{opus_shim_mode::provisioning};
  ahead.set_table({1, 0, 0, 1, 1});
  std::vector<bool> after;
  before.clear();
  for (size_t k = 0; k < 5; ++k) {
    before.push_back(ahead.write_before(k, true));
    after.push_back(ahead.write_after(k));
  }
  BOOST_CHECK((before == std::vector<bool>{false, true, true, false, false}));
  BOOST_CHECK((after == std::vector<bool>{true, true, true, false, false}));
}

BOOST_AUTO_TEST_CASE(the_phase_table_comes_from_the_learned_phases) {
  v1::OpusRegistered r;
  for (auto [stage, digit, first, last] : std::vector<std::array<uint32_t, 4>>{
         {0, 1, 0, 0}, {0, 0, 1, 2}, {1, 0, 0, 0}, {0, 1, 3, 4}}) {
    auto* p = r.add_phases();
    p->set_stage(stage);
    p->set_digit(digit);
    p->set_first(first);
    p->set_last(last);
  }
  BOOST_CHECK((phase_table(r, 0) == std::vector<uint32_t>{1, 0, 0, 1, 1}));
  BOOST_CHECK((phase_table(r, 1) == std::vector<uint32_t>{0}));
  BOOST_CHECK(phase_table(r, 2).empty());
}

BOOST_AUTO_TEST_SUITE_END()

#include "fabric/traffic_monitor.hpp"

BOOST_AUTO_TEST_SUITE(mfabric_traffic_prediction)

namespace {

/// A random column-stochastic n x n matrix (row-major, P[j * n + i]).
std::vector<double> random_transition(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u{0, 1};
  std::vector<double> p(n * n);
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (size_t j = 0; j < n; ++j)
      sum += p[j * n + i] = std::pow(u(rng), 3); // a few dominant destinations
    for (size_t j = 0; j < n; ++j)
      p[j * n + i] /= sum;
  }
  return p;
}

std::vector<double> transitioned(const std::vector<double>& p, const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<double> y(n, 0);
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < n; ++i)
      y[j] += p[j * n + i] * x[i];
  return y;
}

double l1(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d += std::abs(a[i] - b[i]);
  return d;
}

} // namespace

BOOST_AUTO_TEST_CASE(simplex_projection_keeps_a_distribution_and_fixes_the_rest) {
  auto same = project_to_simplex({0.2, 0.3, 0.5});
  BOOST_CHECK_CLOSE(same[2], 0.5, 1e-9);
  auto p = project_to_simplex({2.0, -1.0, 0.5, 0.0});
  BOOST_CHECK_CLOSE(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-9);
  for (double x : p)
    BOOST_CHECK_GE(x, 0.0);
  BOOST_CHECK_CLOSE(p[0], 1.0, 1e-9); // 2 - 1 = 1, the rest at zero
}

BOOST_AUTO_TEST_CASE(the_monitor_learns_the_layer_transition_and_predicts_the_next_load) {
  // App. B: layer 1's load follows layer 0's through a fixed P; after a window of iterations
  // the prediction beats assuming the previous layer's load (the "unchanged topology").
  std::mt19937_64 rng{11};
  const size_t n = 8;
  auto p = random_transition(n, rng);
  traffic_monitor monitor{8, 0.8};
  std::gamma_distribution<double> popularity{0.7, 1.0};
  double predicted_error = 0, unchanged_error = 0;
  for (uint64_t it = 0; it < 20; ++it) {
    std::vector<double> layer0(n);
    for (auto& x : layer0)
      x = 1000 * popularity(rng);
    auto x = normalised(layer0);
    auto truth = transitioned(p, x);
    monitor.record(it, 0, layer0);
    auto guess = monitor.predict(it, 1);
    if (it == 0)
      BOOST_CHECK(!guess); // nothing learnt yet
    else if (it >= 10) {
      BOOST_REQUIRE(guess);
      predicted_error += l1(*guess, truth);
      unchanged_error += l1(x, truth);
    }
    std::vector<double> layer1(truth.begin(), truth.end());
    for (auto& v : layer1)
      v *= 5000; // token counts, any scale
    monitor.record(it, 1, layer1);
  }
  BOOST_TEST_MESSAGE("mean L1 error: predicted " << predicted_error / 10 << ", unchanged "
                                                 << unchanged_error / 10);
  BOOST_CHECK_LT(predicted_error / 10, 0.05);
  BOOST_CHECK_LT(predicted_error, unchanged_error / 5);
  BOOST_CHECK(!monitor.predict(20, 1)); // layer 0 of iteration 20 not reported
}

BOOST_AUTO_TEST_SUITE_END()
