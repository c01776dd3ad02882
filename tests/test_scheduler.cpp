#define BOOST_TEST_MODULE scheduler
#include <boost/test/unit_test.hpp>

#include "scheduler/meta_iteration.hpp"
#include "scheduler/placement.hpp"

using namespace loom;

BOOST_AUTO_TEST_SUITE(round_robin)

BOOST_AUTO_TEST_CASE(unsaturated_group_cycles_at_the_longest_solo_time) {
  // A: roll 10, train 5; B: roll 4, train 3, on the same rollout node. T_cycle = 15,
  // T_load = max(5 + 3, 10 + 4) = 14 < 15: B's phases fit in A's bubbles (Theorem 1).
  std::vector<loom::group_member> g{{{0}, 10, 5, 0}, {{0}, 4, 3, 0}};
  BOOST_CHECK_EQUAL(cycle_time(g), 15.0);
  BOOST_CHECK_EQUAL(load_time(g), 14.0);
  BOOST_CHECK(!saturated(g));
  auto t = meta_iteration_times(g);
  BOOST_CHECK_CLOSE(t[0], 15.0, 1e-9);
  BOOST_CHECK_CLOSE(t[1], 15.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(saturated_group_cycles_at_its_bottleneck_load) {
  // B's rollout grows to 8: node 0 needs 18 per meta-iteration > T_cycle 15.
  std::vector<loom::group_member> g{{{0}, 10, 5, 0}, {{0}, 8, 3, 0}};
  BOOST_CHECK(saturated(g));
  auto t = meta_iteration_times(g);
  BOOST_CHECK_CLOSE(t[0], 18.0, 1e-9);
  BOOST_CHECK_CLOSE(t[1], 18.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(training_is_shared_in_round_robin_order) {
  // Separate rollout nodes, shared training: roll_A [0,10], roll_B [0,4], train_A [10,15],
  // train_B [15,18] (B waits its turn), then every cycle repeats at 15.
  std::vector<loom::group_member> g{{{0}, 10, 5, 0}, {{1}, 4, 3, 0}};
  BOOST_CHECK_EQUAL(load_time(g), 10.0);
  auto t = meta_iteration_times(g);
  BOOST_CHECK_CLOSE(t[1], 15.0, 1e-9);
  // Sync delays the next rollout of its own job only: A's iteration becomes 15 + 2.
  std::vector<loom::group_member> synced{{{0}, 10, 5, 2}, {{1}, 4, 3, 0}};
  BOOST_CHECK_CLOSE(meta_iteration_times(synced)[0], 17.0, 1e-9);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(inter_group)

namespace {

// Four H20 and four H800 nodes of 8 GPUs, 1 TB host memory (WEAVE Table 1 prices).
placement_engine small_cluster(int max_group_size = 4) {
  std::vector<pool_node> roll;
  std::vector<pool_node> train;
  for (int i = 0; i < 4; ++i) {
    roll.push_back({"r" + std::to_string(i), 8, 1000, 8 * 1.85});
    train.push_back({"t" + std::to_string(i), 8, 1000, 8 * 5.28});
  }
  return placement_engine{roll, train, max_group_size};
}

rl_job job(std::string id, double roll, double train, double slo, double rollout_mem = 100,
           double training_mem = 100) {
  return rl_job{std::move(id), 8, 8, rollout_mem, training_mem, slo, roll, train, 0};
}

placement_decision place_and_commit(placement_engine& e, const rl_job& j) {
  auto d = e.place(j);
  e.commit(j, d);
  return d;
}

} // namespace

BOOST_AUTO_TEST_CASE(each_strategy_where_it_is_cheapest) {
  auto e = small_cluster();
  auto a = place_and_commit(e, job("A", 10, 5, 2.0));
  BOOST_CHECK(a.kind == placement_kind::new_group);
  BOOST_CHECK_CLOSE(a.delta_cost_per_hour, 8 * 1.85 + 8 * 5.28, 1e-9);
  // B fits in A's bubbles on A's own nodes: 15 / 7 = 2.14x slowdown, within its 2.2 SLO.
  auto b = place_and_commit(e, job("B", 4, 3, 2.2));
  BOOST_CHECK(b.kind == placement_kind::direct_packing);
  BOOST_CHECK_EQUAL(b.delta_cost_per_hour, 0.0);
  BOOST_CHECK(b.rollout_nodes == a.rollout_nodes);
  // D's rollout working set no longer fits A's node (100 + 100 + 850 >= 1000 GB): it gets a
  // fresh rollout node and shares the training node (T_load 14 < 15: 15 / 6 = 2.5x, its SLO).
  auto d = place_and_commit(e, job("D", 4, 2, 2.5, 850));
  BOOST_CHECK(d.kind == placement_kind::rollout_scaling);
  BOOST_CHECK_CLOSE(d.delta_cost_per_hour, 8 * 1.85, 1e-9);
  BOOST_CHECK_EQUAL(e.groups().size(), 1u);
  BOOST_CHECK_CLOSE(e.cost_per_hour(), 2 * 8 * 1.85 + 8 * 5.28, 1e-9);
}

BOOST_AUTO_TEST_CASE(slo_of_new_and_existing_jobs_is_enforced) {
  auto e = small_cluster();
  place_and_commit(e, job("A", 10, 5, 1.05));
  // Packing B would stretch B to 15 / 7 = 2.1x: beyond B's 1.5x, so B gets its own group.
  auto b = place_and_commit(e, job("B", 4, 3, 1.5));
  BOOST_CHECK(b.kind == placement_kind::new_group);
  // C is long itself (solo 20): with A, A's iteration becomes 20 (1.33x > 1.05); with B, B's
  // becomes 20 (2.86x > 1.5), whether C shares B's rollout node or gets a fresh one.
  auto c = e.place(job("C", 12, 8, 3.0));
  BOOST_CHECK(c.kind == placement_kind::new_group);
  BOOST_CHECK_EQUAL(c.group, 3u);
  // With a looser A, C packs at no cost: node load 22, so A runs at 22 / 15 = 1.47x and C at
  // 22 / 20 = 1.1x, both within 3x.
  placement_engine relaxed = small_cluster();
  place_and_commit(relaxed, job("A", 10, 5, 3.0));
  auto packed = relaxed.place(job("C", 12, 8, 3.0));
  BOOST_CHECK(packed.kind == placement_kind::direct_packing);
  BOOST_CHECK_EQUAL(packed.delta_cost_per_hour, 0.0);
}

BOOST_AUTO_TEST_CASE(saturated_groups_are_pruned) {
  auto e = small_cluster();
  place_and_commit(e, job("A", 10, 5, 3.0));
  place_and_commit(e, job("B", 8, 3, 3.0)); // node load 18 >= 15: the group saturates
  BOOST_REQUIRE_EQUAL(e.groups().size(), 1u);
  BOOST_CHECK(e.groups().begin()->second.is_saturated);
  auto tiny = e.place(job("T", 0.5, 0.1, 10.0));
  BOOST_CHECK(tiny.kind == placement_kind::new_group);
}

BOOST_AUTO_TEST_CASE(an_impossible_job_is_rejected_with_the_reason) {
  auto e = small_cluster(1);
  for (int i = 0; i < 4; ++i)
    place_and_commit(e, job("J" + std::to_string(i), 10, 5, 1.0));
  auto late = e.place(job("late", 10, 5, 1.0));
  BOOST_CHECK(late.kind == placement_kind::rejected);
  BOOST_CHECK(late.reason.find("no group has slack") != std::string::npos);
  auto huge = small_cluster().place(job("huge", 10, 5, 2.0, 5000, 5000));
  BOOST_CHECK(huge.kind == placement_kind::rejected);
  BOOST_CHECK(huge.reason.find("host memory") != std::string::npos);
  auto bad = small_cluster().place(rl_job{"bad", 0, 8, 1, 1, 1.5, 10, 5, 0});
  BOOST_CHECK(bad.reason.find("invalid job") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(leaving_jobs_release_their_nodes) {
  auto e = small_cluster();
  place_and_commit(e, job("A", 10, 5, 2.0));
  place_and_commit(e, job("B", 4, 3, 2.2));
  place_and_commit(e, job("D", 4, 2, 2.5, 850));
  BOOST_CHECK(e.remove("D")); // its own rollout node goes back
  BOOST_CHECK_EQUAL(e.gpus_in_use(true), 8);
  BOOST_CHECK(e.remove("A"));
  BOOST_CHECK(e.remove("B"));
  BOOST_CHECK(!e.remove("B"));
  BOOST_CHECK(e.groups().empty());
  BOOST_CHECK_EQUAL(e.cost_per_hour(), 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
