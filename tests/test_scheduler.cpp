#define BOOST_TEST_MODULE scheduler
#include <boost/test/unit_test.hpp>

#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <random>
#include <tuple>

#include "config/config.hpp"
#include "records/codecs.hpp"
#include "scheduler/consolidation.hpp"
#include "scheduler/iteration_ledger.hpp"
#include "scheduler/job_spec.hpp"
#include "scheduler/meta_iteration.hpp"
#include "scheduler/phase_costs.hpp"
#include "scheduler/placement.hpp"
#include "scheduler/round_robin.hpp"
#include "scheduler/sync_plan.hpp"

using namespace loom;

BOOST_AUTO_TEST_SUITE(meta_iteration_schedule)

BOOST_AUTO_TEST_CASE(unsaturated_group_cycles_at_the_longest_solo_time) {
  // A: roll 10, train 5; B: roll 4, train 3, on the same rollout node. T_cycle = 15,
  // T_load = max(5 + 3, 10 + 4) = 14 < 15: B's phases fit in A's bubbles (Theorem 1).
  std::vector<loom::planned_phases> g{{{0}, 10, 5, 0}, {{0}, 4, 3, 0}};
  BOOST_CHECK_EQUAL(cycle_time(g), 15.0);
  BOOST_CHECK_EQUAL(load_time(g), 14.0);
  BOOST_CHECK(!saturated(g));
  auto t = meta_iteration_times(g);
  BOOST_CHECK_CLOSE(t[0], 15.0, 1e-9);
  BOOST_CHECK_CLOSE(t[1], 15.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(saturated_group_cycles_at_its_bottleneck_load) {
  // B's rollout grows to 8: node 0 needs 18 per meta-iteration > T_cycle 15.
  std::vector<loom::planned_phases> g{{{0}, 10, 5, 0}, {{0}, 8, 3, 0}};
  BOOST_CHECK(saturated(g));
  auto t = meta_iteration_times(g);
  BOOST_CHECK_CLOSE(t[0], 18.0, 1e-9);
  BOOST_CHECK_CLOSE(t[1], 18.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(training_is_shared_in_round_robin_order) {
  // Separate rollout nodes, shared training: roll_A [0,10], roll_B [0,4], train_A [10,15],
  // train_B [15,18] (B waits its turn), then every cycle repeats at 15.
  std::vector<loom::planned_phases> g{{{0}, 10, 5, 0}, {{1}, 4, 3, 0}};
  BOOST_CHECK_EQUAL(load_time(g), 10.0);
  auto t = meta_iteration_times(g);
  BOOST_CHECK_CLOSE(t[1], 15.0, 1e-9);
  // Sync delays the next rollout of its own job only: A's iteration becomes 15 + 2.
  std::vector<loom::planned_phases> synced{{{0}, 10, 5, 2}, {{1}, 4, 3, 0}};
  BOOST_CHECK_CLOSE(meta_iteration_times(synced)[0], 17.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(the_transition_into_a_join_is_planned_iteration_by_iteration) {
  // A (roll 2, train 2, sync 1) and B (roll 4, train 4) share node 0 and cycle at 8: A rolls
  // [8r-2, 8r], trains [8r+2, 8r+4]; B trains [8r+6, 8r+10]. J (roll 2, train 6, node 1)
  // joins at round 8, admitted at the latest as A starts at 62: roll [62, 64], but it trains
  // after B, [74, 80]. In round 9 A rolls [70, 72] but the pool is J's until 80: A trains
  // [80, 82] and is ready at 83, 14 after its previous end at 69. From round 10 on everyone
  // cycles at 12.
  std::vector<loom::planned_phases> g{{{0}, 2, 2, 1}, {{0}, 4, 4, 0}, {{1}, 2, 6, 0}};
  auto steady = meta_iteration_times(g);
  auto longest = longest_iterations_after_join(g);
  for (size_t k = 0; k < 3; ++k)
    BOOST_CHECK_CLOSE(steady[k], 12.0, 1e-9);
  BOOST_CHECK_CLOSE(longest[0], 14.0, 1e-9);
  BOOST_CHECK_CLOSE(longest[1], 12.0, 1e-9);
  BOOST_CHECK_CLOSE(longest[2], 12.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(the_iteration_bound_covers_what_a_short_previous_iteration_leaves_pending) {
  // A (roll 2, train 2, sync 1) and B (roll 4, train 4) share node 0: the worst-case round
  // robin cycles at 8. When A's training and sync ran near zero, A ends right after its
  // rollout while B's rollout has just started: A rolls [4, 6], waits for B's training [4, 8],
  // trains [8, 10] and syncs: 11. B symmetrically waits behind A's sync, rollout and training.
  std::vector<loom::planned_phases> g{{{0}, 2, 2, 1}, {{0}, 4, 4, 0}};
  auto bounds = iteration_bounds(g);
  BOOST_CHECK_CLOSE(bounds[0], 11.0, 1e-9);
  BOOST_CHECK_CLOSE(bounds[1], 11.0, 1e-9);
  BOOST_CHECK_CLOSE(longest_iterations_after_join(g)[0], 8.0, 1e-9);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(slo_guarantee)

namespace {

/// Drives the runtime's round robin (no tail migration, no switch costs) with every phase
/// taking a random share of its worst case: near zero, all of it, or anything between. All
/// members but the last start together; the last joins once the first has run `join_after`
/// iterations. Returns each member's iteration end times.
std::vector<std::vector<double>> run_realized(const std::vector<loom::planned_phases>& plan,
                                              std::mt19937_64& rng, int join_after, int rounds) {
  const size_t n = plan.size();
  round_robin rr{8, 8, 0.8, false};
  std::vector<std::vector<double>> ends(n);
  auto name = [](size_t k) { return "j" + std::to_string(k); };
  auto worst = [&](size_t k, phase_kind p) {
    return p == phase_kind::rollout ? plan[k].rollout_s
           : p == phase_kind::training ? plan[k].training_s : plan[k].sync_s;
  };
  std::uniform_real_distribution<double> unit{0.0, 1.0};
  auto share = [&] {
    double u = unit(rng);
    return u < 0.3 ? 1e-3 : u < 0.6 ? 1.0 : unit(rng);
  };
  using event = std::tuple<double, uint64_t, size_t, phase_kind>;
  std::priority_queue<event, std::vector<event>, std::greater<>> due;
  uint64_t seq = 0;
  double now = 0;
  auto start = [&](const executor_actions& a) {
    for (auto& g : a.grants) {
      size_t k = std::stoul(g.job.substr(1));
      due.emplace(now + share() * worst(k, g.phase), seq++, k, g.phase);
    }
  };
  auto join = [&](size_t k) {
    start(rr.add(loom::group_member{rl_job{.id = name(k), .rollout_gpus = 8}, plan[k].rollout_nodes},
                 phase_switches{}, true));
  };
  for (size_t k = 0; k + 1 < n; ++k)
    join(k);
  bool joined = false;
  while (!due.empty() && ends.back().size() < size_t(rounds)) {
    auto [t, s, k, phase] = due.top();
    due.pop();
    now = t;
    if (phase == phase_kind::sync)
      ends[k].push_back(now);
    start(rr.phase_done(name(k), phase));
    if (!joined && ends[0].size() >= size_t(join_after)) {
      joined = true;
      join(n - 1);
    }
  }
  return ends;
}

/// A random group: 2 to 5 members over 1 to 3 rollout nodes, worst cases 1-100 s.
std::vector<loom::planned_phases> random_group(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> members{2, 5}, nodes{1, 3};
  std::uniform_real_distribution<double> phase{1.0, 100.0}, sync{0.0, 10.0};
  const int node_count = nodes(rng);
  std::uniform_int_distribution<int> node{0, node_count - 1};
  std::vector<loom::planned_phases> plan(size_t(members(rng)));
  for (auto& m : plan)
    m = {{node(rng)}, phase(rng), phase(rng), sync(rng)};
  return plan;
}

/// The longest iteration of each member after its first, over `trials` realizations, as a
/// share of what admission held it to.
/// What admission holds each member to (placement_engine::meets_slos): the join at the worst
/// case, and under any_realization the single-iteration bound too.
std::vector<double> admitted_iterations(const std::vector<loom::planned_phases>& plan,
                                        slo_bound bound) {
  auto times = longest_iterations_after_join(plan);
  if (bound == slo_bound::any_realization) {
    auto bounds = iteration_bounds(plan);
    for (size_t k = 0; k < plan.size(); ++k)
      times[k] = std::max(times[k], bounds[k]);
  }
  return times;
}

std::vector<double> worst_share(const std::vector<loom::planned_phases>& plan,
                                const std::vector<double>& admitted, std::mt19937_64& rng,
                                int trials) {
  std::vector<double> out(plan.size(), 0.0);
  for (int t = 0; t < trials; ++t) {
    auto ends = run_realized(plan, rng, 1 + t % 4, 12);
    for (size_t k = 0; k < plan.size(); ++k)
      for (size_t i = 1; i < ends[k].size(); ++i)
        out[k] = std::max(out[k], (ends[k][i] - ends[k][i - 1]) / admitted[k]);
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(an_iteration_admitted_under_any_realization_never_exceeds_its_bound) {
  // Each member's SLO is set exactly at what admission checked (the tightest group admitted):
  // no realization of any of 300 random groups may take an iteration past it.
  std::mt19937_64 rng{20261126};
  for (int g = 0; g < 300; ++g) {
    auto plan = random_group(rng);
    auto admitted = admitted_iterations(plan, slo_bound::any_realization);
    auto share = worst_share(plan, admitted, rng, 8);
    for (size_t k = 0; k < plan.size(); ++k)
      BOOST_REQUIRE_MESSAGE(share[k] <= 1 + 1e-9, "group " << g << " member " << k << ": "
                                                            << share[k] << " of its bound");
  }
}

BOOST_AUTO_TEST_CASE(the_worst_case_schedule_alone_is_exceeded_after_a_short_iteration) {
  // The paper's check (§4.2) bounds when iterations end, not how long one lasts: some
  // realizations of the same random groups exceed it, which is what any_realization closes.
  std::mt19937_64 rng{20261126};
  double most = 0;
  for (int g = 0; g < 100; ++g) {
    auto plan = random_group(rng);
    auto share = worst_share(plan, admitted_iterations(plan, slo_bound::worst_case_schedule),
                             rng, 8);
    most = std::max(most, *std::max_element(share.begin(), share.end()));
  }
  BOOST_CHECK_GT(most, 1.01);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(inter_group)

namespace {

// Four H20 and four H800 nodes of 8 GPUs, 1 TB host memory (WEAVE Table 1 prices). Warm
// starts are free here: these tests' arithmetic counts the phases alone.
placement_engine small_cluster(int max_group_size = 4) {
  weave_policy policy;
  policy.max_group_size = max_group_size;
  policy.warm_start_gbps_per_gpu = std::numeric_limits<double>::infinity();
  std::vector<pool_node> roll;
  std::vector<pool_node> train;
  for (int i = 0; i < 4; ++i) {
    roll.push_back({"r" + std::to_string(i), 8, 1000, 8 * 1.85});
    train.push_back({"t" + std::to_string(i), 8, 1000, 8 * 5.28});
  }
  return placement_engine{roll, train, policy};
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

BOOST_AUTO_TEST_CASE(a_profiling_pass_runs_in_a_group_of_its_own_that_nobody_joins) {
  auto e = small_cluster();
  auto p = job("P", 0, 0, 2.0);
  p.profile = true; // WEAVE §5 (1): no phase times yet
  auto d = place_and_commit(e, p);
  BOOST_CHECK(d.kind == placement_kind::new_group);
  // B would fit in any group's bubbles: it still does not join the profiling one.
  auto b = place_and_commit(e, job("B", 4, 3, 5.0));
  BOOST_CHECK(b.kind == placement_kind::new_group);
  BOOST_CHECK_NE(b.group, d.group);
  // Profiled, P leaves and is placed with its measured phases: it packs onto B's nodes.
  BOOST_CHECK(e.remove("P"));
  auto measured = job("P", 2, 1, 5.0);
  auto again = place_and_commit(e, measured);
  BOOST_CHECK(again.kind == placement_kind::direct_packing);
  BOOST_CHECK_EQUAL(again.group, b.group);
}

BOOST_AUTO_TEST_CASE(room_and_memory_checks_are_the_ones_placement_uses) {
  auto e = small_cluster(2);
  place_and_commit(e, job("A", 10, 5, 3.0, 400, 300));
  const auto& g = e.groups().begin()->second;
  auto node = g.rollout_nodes.front();
  // 400 GB of A's rollout state on its node: 500 more fit (< 1000), 600 do not.
  BOOST_CHECK(e.rollout_fits(g, job("B", 4, 3, 3.0, 500), node));
  BOOST_CHECK(!e.rollout_fits(g, job("B", 4, 3, 3.0, 600), node));
  // The training nodes hold A's 300 GB: 690 more fit, 700 do not; nor does a third member.
  BOOST_CHECK(e.has_room(g, job("B", 4, 3, 3.0, 100, 690)));
  BOOST_CHECK(!e.has_room(g, job("B", 4, 3, 3.0, 100, 700)));
  // A rollout that does not fit A's node is not packed there: it gets fresh rollout nodes.
  BOOST_CHECK(e.place(job("B", 4, 3, 3.0, 600)).kind == placement_kind::rollout_scaling);
  place_and_commit(e, job("B", 4, 3, 3.0));
  BOOST_CHECK(!e.has_room(g, job("C", 1, 1, 3.0)));
  BOOST_CHECK(e.place(job("C", 1, 1, 3.0)).kind == placement_kind::new_group);
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

BOOST_AUTO_TEST_CASE(a_job_wider_than_the_training_pool_joins_with_its_dp_matched) {
  auto e = small_cluster();
  auto a = place_and_commit(e, job("A", 10, 5, 3.0));
  // L trains on 16 GPUs (4 s); in A's 8-GPU pool it takes 8 s and holds twice the state per
  // node. Node load 20: A runs at 20 / 15 = 1.33x, L at 20 / 14 = 1.43x, both within 3x.
  rl_job wide{"L", 8, 16, 100, 100, 3.0, 10, 4, 0};
  auto l = place_and_commit(e, wide);
  BOOST_CHECK(l.kind == placement_kind::direct_packing);
  BOOST_CHECK_EQUAL(l.group, a.group);
  BOOST_CHECK_CLOSE(e.groups().begin()->second.plan[1].training_s, 8.0, 1e-9);
  BOOST_CHECK_CLOSE(e.training_memory_used(e.groups().begin()->second), 300.0, 1e-9);
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

BOOST_AUTO_TEST_CASE(a_departure_lets_the_rest_of_its_group_merge_into_another) {
  auto e = small_cluster(2);
  place_and_commit(e, job("A", 10, 5, 2.0));
  place_and_commit(e, job("B", 4, 3, 2.2)); // A's group is full now
  auto c = place_and_commit(e, job("C", 4, 3, 2.2));
  BOOST_REQUIRE(c.kind == placement_kind::new_group);
  const uint64_t g1 = e.groups().begin()->first;
  e.remove("A");
  // B alone holds g1 (a rollout and a training node); C's group takes it: together they load
  // node 0 with 8 s against a 7 s cycle, 8 / 7 = 1.14x, within both SLOs.
  const double one_group = 8 * 1.85 + 8 * 5.28;
  const double before = e.cost_per_hour();
  auto plan = plan_regrouping(e, g1, {{"B", {10 * 3600, 300}}});
  BOOST_REQUIRE(plan.worthwhile());
  BOOST_REQUIRE_EQUAL(plan.moves.size(), 1u);
  BOOST_CHECK_EQUAL(plan.moves[0].id, "B");
  BOOST_CHECK_CLOSE(plan.saving_per_hour, one_group, 1e-9);
  BOOST_CHECK_CLOSE(plan.horizon_h, 10.0, 1e-9);
  BOOST_CHECK_CLOSE(plan.restart_cost, 300.0 / 3600 * one_group, 1e-9); // B's share: all of g1
  // Tried in place and undone: the same groups, members, nodes and cost, and the next new
  // group still gets the id it would have had.
  BOOST_CHECK_EQUAL(e.cost_per_hour(), before);
  BOOST_REQUIRE_EQUAL(e.groups().size(), 2u);
  BOOST_CHECK_EQUAL(e.groups().at(g1).members.size(), 1u);
  BOOST_CHECK_EQUAL(e.groups().at(g1).members[0].job.id, "B");
  BOOST_CHECK(e.groups().at(g1).rollout_nodes == std::vector<int>{0});
  BOOST_CHECK(e.groups().at(g1).training_nodes == std::vector<int>{0});
  BOOST_CHECK_EQUAL(e.next_group_id(), c.group + 1);
  BOOST_CHECK_EQUAL(e.gpus_in_use(true), 16);
  // The same move for a job about to end does not pay for its restart: 200 s of saving
  // against 300 s of its GPUs.
  BOOST_CHECK(!plan_regrouping(e, g1, {{"B", {200, 300}}}).worthwhile());
  // A member the scheduler knows no end of is never moved.
  BOOST_CHECK(!plan_regrouping(e, g1, {}).worthwhile());
}

BOOST_AUTO_TEST_CASE(a_training_pool_sized_by_a_departed_job_shrinks) {
  auto e = small_cluster();
  auto wide = job("X", 10, 5, 2.0);
  wide.training_gpus = 16;
  auto x = place_and_commit(e, wide);
  BOOST_REQUIRE_EQUAL(x.new_training_nodes.size(), 2u);
  auto y = place_and_commit(e, job("Y", 4, 3, 2.2));
  BOOST_REQUIRE(y.kind == placement_kind::direct_packing);
  e.remove("X");
  // Y alone keeps X's two training nodes; placed again, it gets a group of its own size.
  auto plan = plan_regrouping(e, x.group, {{"Y", {3600, 60}}});
  BOOST_REQUIRE(plan.worthwhile());
  BOOST_CHECK_CLOSE(plan.saving_per_hour, 8 * 5.28, 1e-9);
}

BOOST_AUTO_TEST_CASE(a_failed_node_is_offered_to_nobody_until_it_is_back) {
  auto e = small_cluster();
  auto a = place_and_commit(e, job("A", 10, 5, 2.0));
  const int roll = a.rollout_nodes.front();
  const int train = e.groups().begin()->second.training_nodes.front();
  // A is pinned to both of its nodes; a job that would pack onto A's rollout node does not.
  BOOST_CHECK(e.jobs_on(true, roll) == std::vector<std::string>{"A"});
  BOOST_CHECK(e.jobs_on(false, train) == std::vector<std::string>{"A"});
  BOOST_CHECK(e.jobs_on(true, roll + 1).empty());
  BOOST_REQUIRE(e.set_failed(true, roll, true));
  BOOST_CHECK(!e.set_failed(true, 99, true));
  auto b = e.place(job("B", 4, 3, 2.2));
  BOOST_CHECK(b.kind == placement_kind::rollout_scaling);
  BOOST_CHECK(std::find(b.rollout_nodes.begin(), b.rollout_nodes.end(), roll)
              == b.rollout_nodes.end());
  // A leaves: its nodes go back, but the failed one stays out of every placement until the
  // rollout pool is full without it.
  BOOST_CHECK(e.remove("A"));
  auto uses_roll = [&](const placement_decision& d) {
    return std::find(d.rollout_nodes.begin(), d.rollout_nodes.end(), roll) != d.rollout_nodes.end();
  };
  int placed = 0;
  for (; placed < 10; ++placed) {
    auto d = place_and_commit(e, job("N" + std::to_string(placed), 10, 5, 1.0));
    if (d.kind == placement_kind::rejected)
      break;
    BOOST_CHECK(!uses_roll(d));
  }
  BOOST_CHECK_EQUAL(e.gpus_in_use(true), 3 * 8);
  // Back in service, it takes the next job.
  BOOST_REQUIRE(e.set_failed(true, roll, false));
  auto back = e.place(job("late", 10, 5, 1.0));
  BOOST_CHECK(back.kind != placement_kind::rejected);
  BOOST_CHECK(uses_roll(back));
  // A group training on a failed node takes nobody in.
  auto f = small_cluster();
  auto g = place_and_commit(f, job("A", 10, 5, 2.0));
  f.set_failed(false, f.groups().begin()->second.training_nodes.front(), true);
  BOOST_CHECK(f.place(job("B", 4, 3, 2.2)).group != g.group);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(intra_group)

namespace {

loom::group_member member(std::string job, std::vector<int> nodes, int gpus = 8) {
  rl_job j;
  j.id = std::move(job);
  j.rollout_gpus = gpus;
  return loom::group_member{j, std::move(nodes)};
}

/// Warm 2 s and cold 100 s for rollouts, 3 s and 120 s for training.
const phase_switches switches{{2, 100}, {3, 120}};

const phase_grant* grant_for(const executor_actions& a, const std::string& job) {
  for (auto& g : a.grants)
    if (g.job == job)
      return &g;
  return nullptr;
}

/// A's first rollout and training (B waits to join the next round); its sync is up to the
/// caller.
void first_round_of_a(round_robin& rr) {
  rr.phase_done("A", phase_kind::rollout);
  rr.phase_done("A", phase_kind::training);
}

} // namespace

BOOST_AUTO_TEST_CASE(phases_run_in_round_robin_order_with_run_permits) {
  round_robin rr{8, 8, 0.8, false};
  auto a = rr.add(member("A", {0}), switches, true);
  BOOST_REQUIRE(grant_for(a, "A"));
  BOOST_CHECK(grant_for(a, "A")->phase == phase_kind::rollout);
  BOOST_CHECK_EQUAL(grant_for(a, "A")->gpus, 8);
  BOOST_CHECK(rr.add(member("B", {0}), switches, true).grants.empty()); // node 0 is busy: B waits
  BOOST_CHECK(rr.rollout_queue(0) == std::vector<std::string>{"B"});
  first_round_of_a(rr);
  BOOST_REQUIRE(grant_for(rr.phase_done("A", phase_kind::sync), "A")); // A's turn first
  // A's rollout ends: A trains, B's rollout takes node 0 with a warm start.
  auto b = rr.phase_done("A", phase_kind::rollout);
  BOOST_REQUIRE(grant_for(b, "A") && grant_for(b, "B"));
  BOOST_CHECK(grant_for(b, "A")->phase == phase_kind::training);
  BOOST_CHECK(grant_for(b, "B")->phase == phase_kind::rollout);
  BOOST_CHECK_EQUAL(grant_for(b, "B")->switch_s, 2.0);
  BOOST_CHECK(!grant_for(b, "B")->cold);
  // B's rollout ends while A still trains: B waits for the training pool.
  BOOST_CHECK(rr.phase_done("B", phase_kind::rollout).grants.empty());
  BOOST_CHECK(rr.training_queue() == std::vector<std::string>{"B"});
  auto c = rr.phase_done("A", phase_kind::training);
  BOOST_REQUIRE(grant_for(c, "A") && grant_for(c, "B"));
  BOOST_CHECK(grant_for(c, "A")->phase == phase_kind::sync);
  BOOST_CHECK(grant_for(c, "B")->phase == phase_kind::training);
  // A's sync ends: its next rollout gets node 0 (idle now), warm after B used it.
  auto d = rr.phase_done("A", phase_kind::sync);
  BOOST_REQUIRE(grant_for(d, "A"));
  BOOST_CHECK_EQUAL(grant_for(d, "A")->switch_s, 2.0);
  // Stale or out-of-order reports change nothing.
  BOOST_CHECK(rr.phase_done("B", phase_kind::rollout).grants.empty());
  BOOST_CHECK(rr.phase_done("Z", phase_kind::sync).grants.empty());
}

BOOST_AUTO_TEST_CASE(nobody_runs_a_phase_again_before_the_others_had_their_turn) {
  round_robin rr{8, 8, 0.8, false};
  rr.add(member("A", {0}), switches, true);
  auto b = rr.add(member("B", {1}), switches, true);
  BOOST_REQUIRE(grant_for(b, "B")); // alone on its own node: it rolls at once
  // B's short rollout ends first, but A comes first in every round: the idle pool waits.
  BOOST_CHECK(rr.phase_done("B", phase_kind::rollout).grants.empty());
  BOOST_CHECK(rr.training_queue() == std::vector<std::string>{"B"});
  auto a = rr.phase_done("A", phase_kind::rollout);
  BOOST_REQUIRE(grant_for(a, "A"));
  BOOST_CHECK(grant_for(a, "A")->phase == phase_kind::training);
  // B joined in A's second round: its training waits for A's second training too.
  BOOST_CHECK(!grant_for(rr.phase_done("A", phase_kind::training), "B"));
  BOOST_REQUIRE(grant_for(rr.phase_done("A", phase_kind::sync), "A"));
  auto r = rr.phase_done("A", phase_kind::rollout);
  BOOST_REQUIRE(grant_for(r, "A"));
  BOOST_CHECK(!grant_for(r, "B"));
  auto t = rr.phase_done("A", phase_kind::training);
  BOOST_REQUIRE(grant_for(t, "B"));
  BOOST_CHECK(grant_for(t, "B")->phase == phase_kind::training);
}

// After a restart, members rejoin at the places they held; one whose workers come back late
// (the others ran rounds meanwhile) takes one turn first, not every turn it missed in a row
// (found in grpo_live: a restored job trained twice running while its partner waited).
BOOST_AUTO_TEST_CASE(a_restored_member_staged_late_does_not_take_the_turns_it_missed) {
  round_robin rr{8, 8, 0.8, false};
  std::deque<phase_grant> running;
  auto keep = [&](const executor_actions& a) {
    running.insert(running.end(), a.grants.begin(), a.grants.end());
  };
  keep(rr.add(member("A", {0}), switches, true, turn_place{0, 5}));
  for (int i = 0; i < 9; ++i) { // A runs rounds 5, 6 and 7 alone
    auto g = running.front();
    running.pop_front();
    keep(rr.phase_done(g.job, g.phase));
  }
  BOOST_CHECK_EQUAL(rr.place_of("A")->round, 8u);
  keep(rr.add(member("B", {1}), switches, true, turn_place{1, 5})); // B's place: round 5
  BOOST_CHECK_EQUAL(rr.place_of("B")->round, 7u);
  std::vector<std::string> trained;
  while (trained.size() < 6) {
    BOOST_REQUIRE(!running.empty());
    auto g = running.front();
    running.pop_front();
    if (g.phase == phase_kind::training)
      trained.push_back(g.job);
    keep(rr.phase_done(g.job, g.phase));
  }
  BOOST_CHECK((trained == std::vector<std::string>{"B", "A", "B", "A", "B", "A"}));
  // Staged at once, restored members keep their places: B's round 5 before A's round 6.
  round_robin fresh{8, 8, 0.8, false};
  fresh.add(member("A", {0}), switches, true, turn_place{0, 6});
  fresh.add(member("B", {1}), switches, true, turn_place{1, 5});
  BOOST_CHECK_EQUAL(fresh.place_of("B")->round, 5u);
}

BOOST_AUTO_TEST_CASE(a_joiner_enters_after_the_others_in_the_next_round) {
  round_robin rr{8, 8, 0.8, false};
  rr.add(member("A", {0}), switches, true);
  rr.phase_done("A", phase_kind::rollout); // A trains: node 0 is idle
  // B joins now, but only after A's next rollout: B's first phases slot in behind A's, as in
  // the steady state the planner checked.
  BOOST_CHECK(rr.add(member("B", {0}), switches, true).grants.empty());
  BOOST_CHECK(rr.rollout_queue(0) == std::vector<std::string>{"B"});
  rr.phase_done("A", phase_kind::training);
  auto s = rr.phase_done("A", phase_kind::sync);
  BOOST_REQUIRE(grant_for(s, "A"));
  BOOST_CHECK(!grant_for(s, "B"));
  auto r = rr.phase_done("A", phase_kind::rollout);
  BOOST_REQUIRE(grant_for(r, "B"));
  BOOST_CHECK(grant_for(r, "B")->phase == phase_kind::rollout);
}

BOOST_AUTO_TEST_CASE(first_start_is_cold_unless_staged_and_a_job_alone_switches_nothing) {
  round_robin rr{8, 8, 0.8, false};
  auto a = rr.add(member("A", {0}), switches, false);
  BOOST_REQUIRE(grant_for(a, "A"));
  BOOST_CHECK(grant_for(a, "A")->cold);
  BOOST_CHECK_EQUAL(grant_for(a, "A")->switch_s, 100.0);
  auto t = rr.phase_done("A", phase_kind::rollout);
  BOOST_CHECK_EQUAL(grant_for(t, "A")->switch_s, 120.0);
  rr.phase_done("A", phase_kind::training);
  auto again = rr.phase_done("A", phase_kind::sync);
  BOOST_REQUIRE(grant_for(again, "A"));
  BOOST_CHECK_EQUAL(grant_for(again, "A")->switch_s, 0.0); // its state never left the GPUs
}

BOOST_AUTO_TEST_CASE(tail_migration_frees_gpus_for_the_next_rollout) {
  round_robin rr{8, 8, 0.8, true};
  rr.add(member("A", {0}), switches, true);
  rr.add(member("B", {0}), switches, true);
  first_round_of_a(rr);
  rr.phase_done("A", phase_kind::sync); // A's second rollout; B is next on node 0
  // A has 80% of its responses done: its tail keeps ceil(8 x 0.2) = 2 GPUs, B starts on 6.
  auto t = rr.tail_bound("A");
  BOOST_REQUIRE_EQUAL(t.resizes.size(), 1u);
  BOOST_CHECK_EQUAL(t.resizes[0].job, "A");
  BOOST_CHECK_EQUAL(t.resizes[0].gpus, 2);
  BOOST_REQUIRE(grant_for(t, "B"));
  BOOST_CHECK_EQUAL(grant_for(t, "B")->gpus, 6);
  BOOST_CHECK_EQUAL(rr.free_gpus(0), 0);
  BOOST_CHECK(rr.tail_bound("A").resizes.empty()); // only once
  // A's tail ends: B grows to all 8 GPUs.
  auto d = rr.phase_done("A", phase_kind::rollout);
  BOOST_REQUIRE_EQUAL(d.resizes.size(), 1u);
  BOOST_CHECK_EQUAL(d.resizes[0].job, "B");
  BOOST_CHECK_EQUAL(d.resizes[0].gpus, 8);
  BOOST_CHECK_EQUAL(rr.rollout_gpus_held("B"), 8);
  // Nobody waits behind B, so its own tail is not migrated; nor is anything without the policy.
  BOOST_CHECK(rr.tail_bound("B").resizes.empty());
  round_robin off{8, 8, 0.8, false};
  off.add(member("A", {0}), switches, true);
  off.add(member("B", {0}), switches, true);
  first_round_of_a(off);
  off.phase_done("A", phase_kind::sync);
  BOOST_CHECK(off.tail_bound("A").resizes.empty());
  BOOST_CHECK(off.tail_bound("A").grants.empty());
}

BOOST_AUTO_TEST_CASE(grants_and_resizes_name_the_nodes_and_devices_they_run_on) {
  // #40 item 10: a rollout's grant names its devices on its rollout node, training the whole
  // pool; a tail keeps its first devices and the next rollout gets the others, then grows onto
  // the tail's when it ends.
  round_robin rr{8, 8, 0.8, true};
  rr.name_nodes(std::make_shared<std::vector<std::string>>(std::vector<std::string>{"r0"}),
                {{"t0", {0, 1, 2, 3}}, {"t1", {0, 1, 2, 3}}});
  auto devices = [](const std::vector<node_devices>& d) {
    std::string out;
    for (auto& n : d)
      out += fmt::format("{}:{};", n.node, fmt::join(n.devices, ","));
    return out;
  };
  auto a = rr.add(member("A", {0}), switches, true);
  BOOST_REQUIRE(grant_for(a, "A"));
  BOOST_CHECK_EQUAL(devices(grant_for(a, "A")->devices), "r0:0,1,2,3,4,5,6,7;");
  rr.add(member("B", {0}), switches, true);
  auto t = rr.phase_done("A", phase_kind::rollout);
  BOOST_REQUIRE(grant_for(t, "A"));
  BOOST_CHECK_EQUAL(devices(grant_for(t, "A")->devices), "t0:0,1,2,3;t1:0,1,2,3;");
  rr.phase_done("A", phase_kind::training);
  rr.phase_done("A", phase_kind::sync); // A's second rollout; B is next on node 0
  auto tail = rr.tail_bound("A");
  BOOST_REQUIRE_EQUAL(tail.resizes.size(), 1u);
  BOOST_CHECK_EQUAL(devices(tail.resizes[0].devices), "r0:0,1;");
  BOOST_REQUIRE(grant_for(tail, "B"));
  BOOST_CHECK_EQUAL(devices(grant_for(tail, "B")->devices), "r0:2,3,4,5,6,7;");
  auto grown = rr.phase_done("A", phase_kind::rollout);
  BOOST_REQUIRE_EQUAL(grown.resizes.size(), 1u);
  BOOST_CHECK_EQUAL(devices(grown.resizes[0].devices), "r0:0,1,2,3,4,5,6,7;");
  BOOST_CHECK(grant_for(rr.phase_done("A", phase_kind::sync), "A") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_leaving_job_frees_its_gpus_and_the_others_go_on) {
  round_robin rr{8, 8, 0.8, true};
  rr.add(member("A", {0, 1}, 16), switches, true);
  rr.add(member("B", {1}), switches, true);
  BOOST_CHECK_EQUAL(rr.free_gpus(1), 0);
  auto r = rr.remove("A");
  BOOST_REQUIRE(grant_for(r, "B"));
  BOOST_CHECK_EQUAL(grant_for(r, "B")->gpus, 8);
  BOOST_CHECK_EQUAL(rr.free_gpus(0), 8);
  BOOST_CHECK(!rr.contains("A"));
  BOOST_CHECK(rr.remove("A").grants.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(phase_costs_and_specs)

BOOST_AUTO_TEST_CASE(switch_costs_follow_fig_4_scale) {
  weave_policy p; // 25 GB/s per GPU warm; 60 s + 2 GB/s cold
  auto c = phase_switch_costs(150, 8, p);
  BOOST_CHECK_CLOSE(c.warm_s, 0.75, 1e-9);
  BOOST_CHECK_CLOSE(c.cold_s, 135.0, 1e-9); // the paper's worst cold start
}

BOOST_AUTO_TEST_CASE(topology_aware_sync_sends_one_copy_across_the_link) {
  // 30 GB over 20 Gbps = 12 s per copy. Flat: each of 4 rollout nodes pulls its own copy.
  BOOST_CHECK_CLOSE(model_sync_s(30, 4, 20, 400, false), 48.0, 1e-9);
  // WEAVE §5.2: one copy across (12 s), then a 400 Gbps broadcast (0.6 s).
  BOOST_CHECK_CLOSE(model_sync_s(30, 4, 20, 400, true), 12.6, 1e-9);
  BOOST_CHECK_CLOSE(model_sync_s(30, 1, 20, 400, true), 12.0, 1e-9);
  BOOST_CHECK_EQUAL(model_sync_s(0, 4, 20, 400, true), 0.0);
}

BOOST_AUTO_TEST_CASE(a_job_spec_is_read_strictly) {
  auto ok = parse_job_spec("name = \"q14\"\nmodel = \"Qwen2.5-14B\"\nrollout_gpus = 8\n"
                           "training_gpus = 8\nrollout_host_memory_gb = 445.4\n"
                           "training_host_memory_gb = 456.1\nworst_rollout_s = 300\n"
                           "worst_training_s = 150\nmodel_gb = 29.5\n",
                           "q14.toml", 1.5);
  BOOST_REQUIRE(ok.value);
  BOOST_CHECK_EQUAL(ok.value->id, "q14");
  BOOST_CHECK_EQUAL(ok.value->slo, 1.5); // the default SLO
  BOOST_CHECK_EQUAL(ok.value->rollout_s, 300.0);
  // The store's record of it reads back as it was, with its state and group.
  auto round = decode_job(encode_job({*ok.value, job_state::drifted, "g1", "measured"}));
  BOOST_REQUIRE(round);
  BOOST_CHECK_EQUAL(round->job.model, "Qwen2.5-14B");
  BOOST_CHECK_CLOSE(round->job.model_gb, 29.5, 1e-9);
  BOOST_CHECK_EQUAL(round->state, job_state::drifted);
  BOOST_CHECK_EQUAL(round->group, "g1");
  BOOST_CHECK_EQUAL(round->reason, "measured");
  const std::string bad = "name = \"x\"\nrollout_gpus = 0\ntraining_gpus = 8\n"
                          "rollout_host_memory_gb = 1\ntraining_host_memory_gb = 1\n"
                          "worst_rollout_s = 10\nworst_training_s = 5\nslo = 0.5\ncolour = 1\n";
  auto r = parse_job_spec(bad, "bad.toml", 1.5);
  BOOST_CHECK(!r.value);
  std::string all;
  for (auto& e : r.errors)
    all += e.to_string() + "\n";
  BOOST_CHECK_MESSAGE(all.find("bad.toml:2:") != std::string::npos
                        && all.find("rollout_gpus: must be at least 1") != std::string::npos,
                      all);
  BOOST_CHECK(all.find("bad.toml:8:") != std::string::npos && all.find("slo") != std::string::npos);
  BOOST_CHECK(all.find("colour") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_job_spec_written_reads_back_to_the_same_job) {
  rl_job j{"job-0007", 24, 16, 445.4, 1.0 / 3.0, 1.37, 512.123456789, 1e-5, 0};
  j.model = "Qwen2.5-32B";
  j.max_response_tokens = 16384;
  j.batch_size = 512;
  j.multi_turn = true;
  j.model_gb = 65.5;
  j.iterations = 120;
  auto back = parse_job_spec(format_job_spec(j), "written", 1.5);
  BOOST_REQUIRE(back.value);
  auto& b = *back.value;
  BOOST_CHECK_EQUAL(b.id, j.id);
  BOOST_CHECK_EQUAL(b.model, j.model);
  BOOST_CHECK_EQUAL(b.rollout_gpus, 24);
  BOOST_CHECK(b.multi_turn);
  // Exactly, not approximately: a live run submits what replay decided on.
  BOOST_CHECK(b.training_memory_gb == j.training_memory_gb);
  BOOST_CHECK(b.slo == j.slo && b.rollout_s == j.rollout_s && b.training_s == j.training_s);
  BOOST_CHECK(b.model_gb == j.model_gb && b.iterations == j.iterations);
}

BOOST_AUTO_TEST_CASE(a_profiled_job_names_no_worst_case_and_reads_back_as_profiled) {
  const std::string spec = "name = \"p\"\nrollout_gpus = 8\ntraining_gpus = 8\nprofile = true\n";
  auto r = parse_job_spec(spec, "p.toml", 1.5);
  BOOST_REQUIRE(r.value);
  BOOST_CHECK(r.value->profile);
  BOOST_CHECK(r.value->rollout_s == 0 && r.value->rollout_memory_gb == 0);
  auto back = parse_job_spec(format_job_spec(*r.value), "written", 1.5);
  BOOST_REQUIRE(back.value);
  BOOST_CHECK(back.value->profile);
  // A hand-written worst case beside profile = true is one of them too many.
  auto both = parse_job_spec(spec + "worst_training_s = 9\n", "both.toml", 1.5);
  BOOST_CHECK(!both.value);
  BOOST_REQUIRE(!both.errors.empty());
  BOOST_CHECK_MESSAGE(both.errors[0].to_string().find("both.toml:5:") != std::string::npos
                        && both.errors[0].to_string().find("worst_training_s") != std::string::npos,
                      both.errors[0].to_string());
  // Without it, the worst cases are required as before.
  BOOST_CHECK(!parse_job_spec("name = \"q\"\nrollout_gpus = 8\ntraining_gpus = 8\n", "q", 1.5)
                 .value);
}

BOOST_AUTO_TEST_SUITE(ledger)

namespace {

loom::group_member ledger_member(const std::string& id, double roll, double train,
                                 int64_t iterations) {
  rl_job j{id, 8, 8, 100, 100, 1.5, roll, train, 1};
  j.iterations = iterations;
  return {j, {0}};
}

constexpr int64_t s = 1'000'000'000; // ns

/// A (10 s + 5 s, SLO 1.2) and B (4 s + 3 s, SLO 2.5) in one group, B rolling out on `b_node`.
iteration_ledger a_and_b(int b_node) {
  iteration_ledger l{"g1", 8};
  auto a = ledger_member("A", 10, 5, 0);
  auto b = ledger_member("B", 4, 3, 0);
  a.job.slo = 1.2;
  b.job.slo = 2.5;
  b.rollout_nodes = {b_node};
  l.join(a, 0);
  l.join(b, 0);
  return l;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_profiling_pass_is_measured_not_counted) {
  iteration_ledger l{"g1", 8};
  auto m = ledger_member("P", 0, 0, 5);
  m.job.profile = true;
  l.join(m, 0);
  l.footprint("P", phase_kind::rollout, 3.5);
  BOOST_CHECK(!l.phase_done("P", phase_kind::rollout, 9, 9 * s));
  l.footprint("P", phase_kind::training, 20);
  BOOST_CHECK(!l.phase_done("P", phase_kind::training, 4, 13 * s));
  l.footprint("P", phase_kind::sync, 21); // the trainer's state, still training's
  BOOST_CHECK(!l.drift_victim(0.1));      // no worst case to outgrow yet
  auto end = l.phase_done("P", phase_kind::sync, 1, 14 * s);
  BOOST_REQUIRE(end && end->profiled);
  BOOST_CHECK(!end->completed);
  BOOST_CHECK_EQUAL(end->profiled->job, "P");
  BOOST_CHECK_EQUAL(end->profiled->rollout_s, 9.0);
  BOOST_CHECK_EQUAL(end->profiled->training_s, 4.0);
  BOOST_CHECK_EQUAL(end->profiled->rollout_memory_gb, 3.5);
  BOOST_CHECK_EQUAL(end->profiled->training_memory_gb, 21.0);
  BOOST_CHECK(!l.find("P")); // it leaves to be placed; its iterations start after
}

BOOST_AUTO_TEST_CASE(a_sync_ends_an_iteration_and_the_last_one_completes_the_job) {
  iteration_ledger l{"g1", 8};
  l.join(ledger_member("A", 10, 5, 2), 0);
  BOOST_CHECK(!l.phase_done("A", phase_kind::rollout, 9, 12 * s));
  BOOST_CHECK(!l.phase_done("A", phase_kind::training, 4, 18 * s));
  auto first = l.phase_done("A", phase_kind::sync, 1, 20 * s);
  BOOST_REQUIRE(first);
  BOOST_CHECK(!first->completed);
  BOOST_CHECK_EQUAL(first->record.index, 0);
  BOOST_CHECK_EQUAL(first->record.group, "g1");
  BOOST_CHECK_CLOSE(first->record.duration_s, 20.0, 1e-9);
  BOOST_CHECK_CLOSE(first->record.solo_s, 14.0, 1e-9);        // what the worker measured
  BOOST_CHECK_CLOSE(first->record.planned_solo_s, 16.0, 1e-9); // the profile: 10 + 5 + 1
  auto second = l.phase_done("A", phase_kind::sync, 1, 35 * s);
  BOOST_REQUIRE(second);
  BOOST_CHECK(second->completed);
  BOOST_CHECK_EQUAL(second->record.index, 1);
  BOOST_CHECK_CLOSE(second->record.duration_s, 15.0, 1e-9);
  BOOST_CHECK(!l.find("A")); // it left the ledger
  BOOST_CHECK(!l.phase_done("A", phase_kind::sync, 1, 40 * s));
  BOOST_CHECK(!l.phase_done("Z", phase_kind::sync, 1, 40 * s));
}

BOOST_AUTO_TEST_CASE(the_member_that_drifted_most_is_replaced_once_the_group_saturates) {
  auto l = a_and_b(0);
  // Both roll out on node 0; T_cycle is A's 16 s and every steady iteration takes it. B's
  // rollout measured at 5.5 s (21% over its profile) leaves node 0 at 15.5 s: slack left,
  // every SLO holds (B: 16 s <= 2.5 x 9.5 s). At 6.5 s the load is 16.5 s: saturated, and B
  // is the one that drifted. It reports the longest phases it measured.
  l.phase_done("B", phase_kind::rollout, 5.5, 1 * s);
  BOOST_CHECK(!l.drift_victim(0.1));
  l.phase_done("B", phase_kind::rollout, 6.5, 2 * s);
  l.phase_done("B", phase_kind::rollout, 5.0, 3 * s); // a shorter one does not hide it
  auto d = l.drift_victim(0.1);
  BOOST_REQUIRE(d);
  BOOST_CHECK_EQUAL(d->job, "B");
  BOOST_CHECK_CLOSE(d->rollout_s, 6.5, 1e-9);
  BOOST_CHECK_CLOSE(d->training_s, 3.0, 1e-9);
  BOOST_CHECK(!l.drift_victim(0.1)); // reported once
}

BOOST_AUTO_TEST_CASE(a_change_within_the_drift_margin_is_never_replaced) {
  auto l = a_and_b(0);
  // Saturated at 6.5 s as above, but 9.5 s of work over a 7 s profile is within a 50% margin.
  l.phase_done("B", phase_kind::rollout, 6.5, 1 * s);
  BOOST_CHECK(!l.drift_victim(0.5));
  BOOST_CHECK(l.drift_victim(0.3));
}

BOOST_AUTO_TEST_CASE(a_drift_that_breaks_another_members_slo_is_replaced_before_saturation) {
  auto l = a_and_b(1);
  // B on its own rollout node grows to 8 s + 12 s: node 1 carries 8 s and training 17 s, under
  // the new T_cycle of B's 21 s, so the group is not saturated; but A's iterations now take
  // 21 s, past its 1.2 x 16 s.
  l.phase_done("B", phase_kind::rollout, 8, 1 * s);
  l.phase_done("B", phase_kind::training, 12, 2 * s);
  auto d = l.drift_victim(0.1);
  BOOST_REQUIRE(d);
  BOOST_CHECK_EQUAL(d->job, "B");
}

BOOST_AUTO_TEST_CASE(an_iteration_that_outgrew_the_profile_is_judged_against_its_own_work) {
  iteration_ledger l{"g1", 8};
  l.join(ledger_member("A", 10, 5, 0), 0);
  auto end = l.phase_done("A", phase_kind::sync, 20, 30 * s);
  BOOST_REQUIRE(end);
  BOOST_CHECK_CLOSE(end->record.planned_solo_s, 20.0, 1e-9); // not the 16 s profile
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(shared_members_plan_the_warm_starts_their_executor_pays) {
  auto cfg = parse_config(embedded_config_text(), "embedded");
  BOOST_REQUIRE(cfg.value);
  const auto& policy = cfg.value->policy.weave; // warm starts at 25 GB/s per GPU
  rl_job j{"j", 8, 8, 200, 200, 1.5, 100, 50, 0};
  j.model_gb = 15;
  derive_phase_costs(j, cfg.value->cluster, policy);
  BOOST_CHECK_CLOSE(j.sync_s, 15 * 8 / 20.0, 1e-9);
  // A group member's phases carry the warm starts (200 GB over 8 GPUs: 1 s); its solo time
  // does not.
  placement_engine e{{{"r", 8, 1000, 14.8}}, {{"t", 8, 1000, 42.2}}, policy};
  auto m = e.member_for(j, {0}, 8);
  BOOST_CHECK_CLOSE(m.rollout_s, 101.0, 1e-9);
  BOOST_CHECK_CLOSE(m.training_s, 51.0, 1e-9);
  BOOST_CHECK_CLOSE(j.solo_s(), 156.0, 1e-9);
  // With long-tail migration a shared rollout also plans for the consolidation pause; alone,
  // nothing is added.
  auto migrating = plan_member(j, {0}, 8, member_switches(j, 8, 8, 8, policy), 2.0);
  BOOST_CHECK_CLOSE(migrating.rollout_s, 103.0, 1e-9);
  auto alone = plan_member(j, {0}, 8, std::nullopt, 2.0);
  BOOST_CHECK_CLOSE(alone.rollout_s, 100.0, 1e-9);
  BOOST_CHECK_CLOSE(alone.training_s, 50.0, 1e-9);
  // DP matched down to a 4-GPU pool: twice the training, twice the state per node (400 GB),
  // loaded by the pool's 4 GPUs: 4 s.
  BOOST_CHECK_CLOSE(e.member_for(j, {0}, 4).training_s, 100.0 + 4.0, 1e-9);
  BOOST_CHECK_CLOSE(training_memory_per_node(j, 4), 400.0, 1e-9);
  BOOST_CHECK_CLOSE(training_memory_per_node(j, 16), 200.0, 1e-9);
  // A job narrower than a node in a wider group trains on the group's 8 GPUs per node, and
  // they load its state: 1 s, as the executor pays it (4 s if loaded by its own 2 GPUs).
  rl_job narrow = j;
  narrow.training_gpus = 2;
  const double paid = member_switches(narrow, 8, 8, 8, policy).training.warm_s;
  BOOST_CHECK_CLOSE(paid, 1.0, 1e-9);
  BOOST_CHECK_CLOSE(e.member_for(narrow, {0}, 8).training_s, 50.0 * 2 / 8 + paid, 1e-9);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(weight_sync_route)

// WEAVE §5.2: one copy crosses the link to one rollout node; nodes forward to at most two
// others; a node's other workers copy from its first; workers without an address sit out.
BOOST_AUTO_TEST_CASE(the_link_is_crossed_once_and_nodes_form_a_binary_tree) {
  std::vector<sync_peer> peers{{"w-c", "n3", "tcp://c"}, {"w-a", "n1", "tcp://a"},
                               {"w-a2", "n1", "tcp://a2"}, {"w-b", "n2", "tcp://b"},
                               {"w-d", "n4", "tcp://d"},   {"w-x", "n5", ""}};
  sync_peer trainer{"t", "t0", "tcp://trainer"};
  auto route = sync_route(trainer, peers);
  std::map<std::string, std::string> source;
  for (auto& h : route)
    source[h.worker] = h.source;
  BOOST_REQUIRE_EQUAL(route.size(), 5u);
  BOOST_CHECK_EQUAL(source["w-a"], "tcp://trainer");
  BOOST_CHECK_EQUAL(source["w-b"], "tcp://a");
  BOOST_CHECK_EQUAL(source["w-c"], "tcp://a");
  BOOST_CHECK_EQUAL(source["w-d"], "tcp://b");
  BOOST_CHECK_EQUAL(source["w-a2"], "tcp://a");
  BOOST_CHECK(!source.count("w-x"));
  int from_trainer = 0;
  std::map<std::string, int> fan_out;
  for (auto& h : route) {
    from_trainer += h.source == "tcp://trainer";
    ++fan_out[h.source];
  }
  BOOST_CHECK_EQUAL(from_trainer, 1);
  BOOST_CHECK_LE(fan_out["tcp://b"], 2);
  BOOST_CHECK(sync_route({"t", "t0", ""}, peers).empty()); // no trainer address: no route
}

// OrchestrRL App. E: where the fabric has PoDs, each PoD the trainer is not in gets one seed
// from the trainer over the core and the rest of the PoD hangs off it; in the trainer's own PoD
// its nodes hang off the trainer. A node in no PoD shares the rollout cluster's outside one.
BOOST_AUTO_TEST_CASE(with_pods_each_pod_is_seeded_once_and_fans_out_inside) {
  std::vector<sync_peer> peers{{"w-a", "n1", "tcp://a"}, {"w-b", "n2", "tcp://b"},
                               {"w-c", "n3", "tcp://c"}, {"w-d", "n4", "tcp://d"},
                               {"w-e", "n5", "tcp://e"}, {"w-f", "n6", "tcp://f"}};
  pod_map pods{{"n1", 0}, {"n2", 0}, {"n3", 0}, {"n4", 1}, {"n5", 1}, {"t1", 1}};
  auto sources = [&](const sync_peer& trainer) {
    std::map<std::string, std::string> out;
    for (auto& h : sync_route(trainer, peers, pods))
      out[h.worker] = h.source;
    return out;
  };
  auto apart = sources({"t", "t0", "tcp://t"}); // the trainer in no PoD
  BOOST_CHECK_EQUAL(apart["w-a"], "tcp://t");   // PoD 0's seed
  BOOST_CHECK_EQUAL(apart["w-b"], "tcp://a");
  BOOST_CHECK_EQUAL(apart["w-c"], "tcp://a");
  BOOST_CHECK_EQUAL(apart["w-d"], "tcp://t");   // PoD 1's
  BOOST_CHECK_EQUAL(apart["w-e"], "tcp://d");
  BOOST_CHECK_EQUAL(apart["w-f"], "tcp://t");   // n6, in no PoD: a seed of its own
  auto inside = sources({"t", "t1", "tcp://t"}); // the trainer in PoD 1
  BOOST_CHECK_EQUAL(inside["w-a"], "tcp://t");
  BOOST_CHECK_EQUAL(inside["w-b"], "tcp://a");
  BOOST_CHECK_EQUAL(inside["w-d"], "tcp://t");
  BOOST_CHECK_EQUAL(inside["w-e"], "tcp://t");
  BOOST_CHECK_EQUAL(inside["w-f"], "tcp://t");
}

BOOST_AUTO_TEST_SUITE_END()
