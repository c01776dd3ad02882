// The live generation runtime's cores, without actors: laying instances over engines, the
// simulated engine that obeys commands, the deployment runtime (Alg. 1 over engines: steps,
// placements, reconfiguration phases, migrations, lost engines, deadlines, restore), and the
// loom.v1 forms of its records and commands.

#define BOOST_TEST_MODULE gen_runtime
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "generation/deployment_runtime.hpp"
#include "generation/engine_sim.hpp"
#include "generation/layout.hpp"
#include "records/gen_codecs.hpp"
#include "records/gen_proto.hpp"
#include "types/gpu.hpp"

using namespace loom;

namespace {

engine_model qwen14b() {
  return engine_model{*find_model("Qwen2.5-14B"), *find_builtin_gpu("H800")};
}

deployment_config small_deployment(bool planner = false, bool balancer = false) {
  deployment_config d;
  d.name = "gen";
  d.model = "Qwen2.5-14B";
  d.gpu = "H800";
  d.gpus = 16;
  d.initial = parallel_config{4};
  d.planner_enabled = planner;
  d.balancer_enabled = balancer;
  d.tick_s = 1;
  d.period_s = 10;
  d.command_timeout_s = 5;
  d.command_retries = 1;
  return d;
}

step_batch batch_of(uint64_t step, size_t n) {
  step_batch b;
  b.step = step;
  b.data_address = "tcp://router:9";
  for (size_t i = 0; i < n; ++i)
    b.requests.push_back({step << 32 | i, 100, 0, -1});
  return b;
}

command_ack ack_for(const gen_command& c, std::vector<request_state> released = {}) {
  command_ack a;
  a.command = c.id;
  a.engine = c.engine;
  a.released = std::move(released);
  return a;
}

/// Acknowledges every command of one kind the runtime sent; returns them.
std::vector<gen_command> ack_all(deployment_runtime& rt, std::vector<gen_command> sent,
                                 gen_command_kind kind, double now) {
  std::vector<gen_command> out;
  for (auto& c : sent)
    if (c.kind == kind) {
      rt.on_ack(ack_for(c), now);
      out.push_back(c);
    }
  return out;
}

/// Two engines of 8 GPUs joined, their first layout loaded.
deployment_runtime started(const engine_model& engine, deployment_config d) {
  deployment_runtime rt{engine, std::move(d)};
  rt.join({"e0", "n0", 8, false, "tcp://e0:9"}, 0);
  rt.join({"e1", "n1", 8, false, "tcp://e1:9"}, 0);
  ack_all(rt, rt.take_commands(), gen_command_kind::reshard, 0);
  return rt;
}

instance_stats stats_of(const gen_command& admit, uint64_t epoch, int64_t generated = 0) {
  instance_stats s;
  s.engine = admit.engine;
  s.instance = admit.instance;
  s.epoch = epoch;
  for (auto& r : admit.requests)
    s.requests.push_back({r.id, r.prompt_tokens, generated, true, true});
  s.kv_free_tokens = 100000;
  s.kv_capacity_tokens = 200000;
  s.decode_rate_tps = 30;
  return s;
}

/// Step 0 of 8 requests placed round-robin at t = 0, every admission acknowledged: the admits.
std::vector<gen_command> admitted_step(deployment_runtime& rt) {
  rt.start_step(batch_of(0, 8), 0);
  rt.plan_now(0);
  auto admits = rt.take_commands();
  for (auto& a : admits)
    rt.on_ack(ack_for(a), 0);
  return admits;
}

} // namespace

BOOST_AUTO_TEST_SUITE(layout)

BOOST_AUTO_TEST_CASE(instances_fit_inside_engines_or_take_whole_ones) {
  std::vector<engine_slot> engines{{"a", 8}, {"b", 8}};
  auto tp2 = lay_out(parallel_config{2}, engines, 0);
  BOOST_REQUIRE_EQUAL(tp2.size(), 8u);
  BOOST_CHECK(tp2[3].engines == std::vector<std::string>{"a"});
  BOOST_CHECK(tp2[4].engines == std::vector<std::string>{"b"});
  BOOST_CHECK_EQUAL(tp2[7].instance, 7u);
  auto tp16 = lay_out(parallel_config{16}, engines, 5);
  BOOST_REQUIRE_EQUAL(tp16.size(), 1u);
  BOOST_CHECK_EQUAL(tp16[0].instance, 5u);
  BOOST_CHECK((tp16[0].engines == std::vector<std::string>{"a", "b"}));
  BOOST_CHECK(led_by(tp16, "a") == std::vector<uint32_t>{5});
  BOOST_CHECK(led_by(tp16, "b").empty());
  BOOST_CHECK_EQUAL(carried_by(tp16, "b").size(), 1u);
  // Three engines carry one 16-GPU instance; the third is left idle.
  BOOST_CHECK_EQUAL(lay_out(parallel_config{16}, {{"a", 8}, {"b", 8}, {"c", 8}}, 0).size(), 1u);
  // AFD over one node.
  BOOST_CHECK_EQUAL(lay_out(parallel_config::disaggregated(3, 5), engines, 0).size(), 2u);
}

BOOST_AUTO_TEST_CASE(a_mixed_deployment_numbers_its_latency_instances_last) {
  std::vector<engine_slot> engines{{"a", 8}, {"b", 8}};
  // The wider TP8 is placed first (engine a); the TP2s fill b; ids put the TP2s first.
  auto mixed = lay_out(gen_deployment{2, 4, 8, 1}, engines);
  BOOST_REQUIRE_EQUAL(mixed.size(), 5u);
  for (uint32_t k = 0; k < 4; ++k) {
    BOOST_CHECK_EQUAL(mixed[k].instance, k);
    BOOST_CHECK(mixed[k].config == parallel_config{2});
    BOOST_CHECK(mixed[k].engines == std::vector<std::string>{"b"});
  }
  BOOST_CHECK_EQUAL(mixed[4].instance, 4u);
  BOOST_CHECK(mixed[4].config == parallel_config{8});
  BOOST_CHECK(mixed[4].engines == std::vector<std::string>{"a"});
  // Two kinds inside one engine: 6 x TP2 + 1 x TP4 over 16 GPUs.
  auto shared = lay_out(gen_deployment{2, 6, 4, 1}, engines);
  BOOST_REQUIRE_EQUAL(shared.size(), 7u);
  BOOST_CHECK(shared[6].config == parallel_config{4});
  BOOST_CHECK_EQUAL(carried_by(shared, "a").size(), 3u); // the TP4 and two TP2s
  // More than the engines carry: short, and the caller drops the plan.
  BOOST_CHECK_EQUAL(lay_out(gen_deployment{2, 8, 8, 1}, engines).size(), 5u);
  BOOST_CHECK_EQUAL((gen_deployment{2, 4, 8, 1}).name(), "4xTP2+1xTP8");
  BOOST_CHECK_EQUAL((gen_deployment{2, 4, 8, 1}).gpus(), 16);
}

BOOST_AUTO_TEST_CASE(parallel_configs_parse_from_their_names) {
  for (auto c : {parallel_config{4}, parallel_config::expert_parallel(16, 2),
                 parallel_config::disaggregated(3, 5)}) {
    auto parsed = parallel_config::parse(c.name());
    BOOST_REQUIRE(parsed);
    BOOST_CHECK(*parsed == c);
  }
  for (auto bad : {"", "TP", "TP0", "tp4", "EP16/TP3", "AFD3", "TP4x", "EP8"})
    BOOST_CHECK_MESSAGE(!parallel_config::parse(bad), bad);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(simulated_engine)

/// Command `id` of `kind` to engine e0.
gen_command to_e0(gen_command_kind kind, uint64_t id, uint64_t epoch = 1) {
  gen_command c;
  c.engine = "e0";
  c.id = id;
  c.kind = kind;
  c.epoch = epoch;
  return c;
}

/// A reshard of e0 to `config`, carrying `instances` instances.
gen_command reshard_e0(uint64_t id, uint64_t epoch, parallel_config config, uint32_t instances) {
  auto c = to_e0(gen_command_kind::reshard, id, epoch);
  c.config = config;
  for (uint32_t k = 0; k < instances; ++k)
    c.slots.push_back({k, {"e0"}, config});
  return c;
}

BOOST_AUTO_TEST_CASE(it_reshards_admits_runs_and_drains_as_commanded) {
  auto engine = qwen14b();
  engine_sim_costs costs;
  engine_sim e{engine, "e0", parallel_config{4}, costs, [](uint64_t id) { return int64_t(50 + id); }};
  auto loaded = e.apply(reshard_e0(1, 1, parallel_config{4}, 2), 0);
  BOOST_CHECK_EQUAL(loaded.due_s, 0.0); // it already runs TP4: nothing to load
  BOOST_CHECK_EQUAL(e.stats().size(), 2u);
  auto admit = to_e0(gen_command_kind::admit, 2);
  admit.instance = 1;
  for (uint64_t id = 0; id < 4; ++id)
    admit.requests.push_back({id, 100, 0, false, {}});
  BOOST_CHECK(e.apply(admit, 0).ack.ok);
  // The same command again gets the same answer and changes nothing.
  BOOST_CHECK(e.apply(admit, 0.1).ack.ok);
  e.advance_to(0.2);
  auto stats = e.stats();
  BOOST_CHECK_EQUAL(stats[1].requests.size(), 4u);
  BOOST_CHECK(stats[0].requests.empty());
  e.advance_to(60);
  auto done = e.take_finished();
  BOOST_REQUIRE_EQUAL(done.size(), 4u);
  for (auto& f : done)
    BOOST_CHECK_EQUAL(f.output_tokens, int64_t(50 + f.id));
  BOOST_CHECK(e.idle());
  // An admit for an instance it does not lead is refused.
  admit.id = 3;
  admit.instance = 7;
  BOOST_CHECK(!e.apply(admit, 60).ack.ok);
}

BOOST_AUTO_TEST_CASE(a_drain_releases_progress_and_a_new_config_takes_its_load_time) {
  auto engine = qwen14b();
  engine_sim_costs costs;
  engine_sim e{engine, "e0", parallel_config{8}, costs, [](uint64_t) { return int64_t(5000); }};
  e.apply(reshard_e0(1, 1, parallel_config{8}, 1), 0);
  auto admit = to_e0(gen_command_kind::admit, 2);
  admit.instance = 0;
  admit.requests = {{10, 200, 0, false, {}}, {11, 300, 0, false, {}}};
  e.apply(admit, 0);
  e.advance_to(5);
  auto released = e.apply(to_e0(gen_command_kind::drain, 3, 2), 5).ack.released;
  BOOST_REQUIRE_EQUAL(released.size(), 2u);
  for (auto& r : released) {
    BOOST_CHECK_GT(r.generated, 0);
    BOOST_CHECK(r.kv_resident);
  }
  BOOST_CHECK_EQUAL(released[0].prompt_tokens, 200);
  BOOST_CHECK(e.stats().empty());
  // Resharding to TP2 loads new shards: the restart plus a quarter of the weights per GPU.
  auto ans = e.apply(reshard_e0(4, 2, parallel_config{2}, 4), 5);
  const double expected = costs.engine_restart_s + engine.weight_bytes_per_gpu(parallel_config{2})
                                                     / (costs.weight_load_gbps * 1e9);
  BOOST_CHECK_CLOSE(ans.due_s - 5, expected, 1e-9);
  BOOST_CHECK_CLOSE(ans.ack.elapsed_s, expected, 1e-9);
  BOOST_CHECK_EQUAL(e.stats().size(), 4u);
}

BOOST_AUTO_TEST_CASE(a_config_it_ran_before_restarts_faster_than_a_new_one) {
  auto engine = qwen14b();
  engine_sim_costs costs;
  engine_sim e{engine, "e0", parallel_config{2}, costs, [](uint64_t) { return int64_t(100); }};
  auto load = [&](uint64_t id, int tp) {
    return e.apply(reshard_e0(id, id, parallel_config{tp}, 8 / tp), double(id)).ack.elapsed_s;
  };
  auto shard_s = [&](int tp) {
    return engine.weight_bytes_per_gpu(parallel_config{tp}) / (costs.weight_load_gbps * 1e9);
  };
  BOOST_CHECK_CLOSE(load(1, 8), costs.engine_restart_s + shard_s(8), 1e-9);  // new: cold
  BOOST_CHECK_CLOSE(load(2, 2), costs.standby_restart_s + shard_s(2), 1e-9); // its first
  BOOST_CHECK_CLOSE(load(3, 8), costs.standby_restart_s + shard_s(8), 1e-9); // ran before
  BOOST_CHECK_CLOSE(load(4, 4), costs.engine_restart_s + shard_s(4), 1e-9);
  // The planner's estimate is the engine's.
  BOOST_CHECK_CLOSE(costs.reshard_s(engine, parallel_config{4}, true),
                    costs.standby_restart_s + shard_s(4), 1e-9);
  BOOST_CHECK_LT(costs.standby_restart_s, costs.engine_restart_s);
}

BOOST_AUTO_TEST_CASE(an_engine_that_keeps_its_config_in_a_mixed_layout_loads_nothing) {
  auto engine = qwen14b();
  engine_sim_costs costs;
  engine_sim e{engine, "e0", parallel_config{2}, costs, [](uint64_t) { return int64_t(100); }};
  auto first = e.apply(reshard_e0(1, 1, parallel_config{2}, 4), 0);
  BOOST_CHECK_EQUAL(first.ack.elapsed_s, 0.0);
  // Its part of 4xTP2+1xTP8 is the same four TP2 instances: nothing to load.
  auto kept = reshard_e0(2, 2, parallel_config{2}, 4);
  auto same = e.apply(kept, 1);
  BOOST_CHECK_EQUAL(same.ack.elapsed_s, 0.0);
  // Given the TP8 instance instead, it loads TP8's shards; one instance, of that config.
  gen_command wide = to_e0(gen_command_kind::reshard, 3, 3);
  wide.config = parallel_config{2}; // the layout's first config; the slot says TP8
  wide.slots.push_back({4, {"e0"}, parallel_config{8}});
  auto loaded = e.apply(wide, 2);
  BOOST_CHECK_CLOSE(loaded.ack.elapsed_s,
                    costs.engine_restart_s + engine.weight_bytes_per_gpu(parallel_config{8})
                                               / (costs.weight_load_gbps * 1e9),
                    1e-9);
  auto stats = e.stats();
  BOOST_REQUIRE_EQUAL(stats.size(), 1u);
  BOOST_CHECK_EQUAL(stats[0].instance, 4u);
}

BOOST_AUTO_TEST_CASE(a_migrated_request_arrives_after_its_kv_transfer) {
  auto engine = qwen14b();
  engine_sim_costs costs;
  engine_sim e{engine, "e0", parallel_config{4}, costs, [](uint64_t) { return int64_t(4000); }};
  e.apply(reshard_e0(1, 1, parallel_config{4}, 1), 0);
  auto admit = to_e0(gen_command_kind::admit, 2);
  admit.instance = 0;
  admit.requests = {{7, 1000, 500, true, "e1"}};
  e.apply(admit, 10);
  const double transfer =
    kv_move_cost_of(engine, parallel_config{4}, 1, 1500, costs.kv_path).transfer_s;
  e.advance_to(10 + transfer / 2);
  BOOST_CHECK(e.stats()[0].requests.empty()); // still on the wire
  e.advance_to(10 + transfer + 0.5);
  auto s = e.stats()[0];
  BOOST_REQUIRE_EQUAL(s.requests.size(), 1u);
  BOOST_CHECK_GE(s.requests[0].generated, 500);
  // Released for a migration, it leaves with what it has.
  auto m = to_e0(gen_command_kind::migrate, 3);
  m.moves = {{7, 0, 1, false}, {99, 0, 1, false}};
  auto out = e.apply(m, 11 + transfer).ack.released;
  BOOST_REQUIRE_EQUAL(out.size(), 1u); // 99 is not here
  BOOST_CHECK_EQUAL(out[0].id, 7u);
  BOOST_CHECK(e.stats()[0].requests.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(deployment)

BOOST_AUTO_TEST_CASE(engines_get_instances_of_the_current_config_and_the_budget_holds) {
  auto engine = qwen14b();
  deployment_runtime rt{engine, small_deployment()};
  BOOST_CHECK(rt.refusal({"e0", "n0", 4, false})); // not a node of 8
  rt.join({"e0", "n0", 8, false}, 0);
  auto first = rt.take_commands();
  BOOST_REQUIRE_EQUAL(first.size(), 1u);
  BOOST_CHECK(first[0].kind == gen_command_kind::reshard);
  BOOST_CHECK_EQUAL(first[0].slots.size(), 2u); // two TP4 instances on e0
  BOOST_CHECK(rt.take_dirty());
  rt.join({"e1", "n1", 8, false}, 0);
  BOOST_CHECK(rt.refusal({"e2", "n2", 8, false})); // 16 GPUs are served
  BOOST_CHECK(!rt.refusal({"e1", "n1", 8, false})); // a known engine may come back
  auto second = rt.take_commands();
  BOOST_REQUIRE_EQUAL(second.size(), 1u);
  BOOST_CHECK_EQUAL(second[0].slots.front().instance, 2u);
  BOOST_CHECK_EQUAL(rt.serving().name(), "4xTP4");
}

BOOST_AUTO_TEST_CASE(a_step_is_placed_round_robin_without_a_planner_and_ends_with_its_last) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment());
  BOOST_CHECK(rt.start_step(batch_of(0, 8), 1) == deployment_runtime::step_admission::started);
  BOOST_CHECK(rt.start_step(batch_of(0, 8), 1) == deployment_runtime::step_admission::current);
  BOOST_CHECK(rt.start_step(batch_of(1, 8), 1) == deployment_runtime::step_admission::busy);
  BOOST_CHECK(!rt.plan_now(1)); // no planner: it placed them itself
  auto admits = rt.take_commands();
  BOOST_REQUIRE_EQUAL(admits.size(), 4u);
  for (auto& a : admits) {
    BOOST_CHECK(a.kind == gen_command_kind::admit);
    BOOST_CHECK_EQUAL(a.requests.size(), 2u);
    BOOST_CHECK_EQUAL(a.requests[0].id % 4, a.instance); // request i on instance i % 4
  }
  auto placed = rt.placement();
  BOOST_REQUIRE(placed);
  BOOST_CHECK_EQUAL(placed->engines[0], "e0");
  BOOST_CHECK_EQUAL(placed->engines[3], "e1");
  BOOST_CHECK_EQUAL(placed->engines[1], "e0");
  BOOST_CHECK_EQUAL(placed->engines[2], "e1");
  // Each engine ends its own requests only (#41 item 3): e0's report of e1's request 7 (on
  // instance 3) is refused, and the rest of the report still counts.
  requests_finished f{"e0", 0, {}};
  for (uint64_t i : {0, 1, 4, 5, 7})
    f.done.push_back({i, 10, int64_t(100 + i)});
  auto r = rt.on_finished(f, 5);
  BOOST_CHECK_EQUAL(r.fresh.size(), 4u);
  BOOST_CHECK_EQUAL(r.refused, "request 7 does not run on engine e0");
  BOOST_CHECK(rt.on_finished(f, 5).fresh.empty()); // a repeat counts once
  BOOST_CHECK_EQUAL(rt.on_finished({"nobody", 0, {{2, 10, 1}}}, 5).fresh.size(), 0u);
  auto more = rt.on_finished({"e1", 0, {{2, 10, 102}, {3, 10, 103}, {6, 10, 106}}}, 5);
  BOOST_CHECK_EQUAL(more.fresh.size(), 3u);
  BOOST_CHECK(!more.step_done);
  auto last = rt.on_finished({"e1", 0, {{7, 30, 500}}}, 6);
  BOOST_REQUIRE(last.step_done);
  BOOST_CHECK_EQUAL(last.step_done->last_finished_at_ns, 500);
  BOOST_CHECK_EQUAL(last.step_done->requests, 8u);
  BOOST_CHECK_EQUAL(rt.step_outputs().size(), 8u);
  BOOST_CHECK(rt.start_step(batch_of(0, 8), 7) == deployment_runtime::step_admission::done);
  BOOST_CHECK_EQUAL(rt.done_outcome(0)->last_finished_at_ns, 500);
}

// A router may number each step's requests 0..n-1 (docs/protocol.md asks only that ids be
// unique within a step): admissions carry the step, finishes name it, and a report for a step
// that does not run is refused with why, never dropped silently.
BOOST_AUTO_TEST_CASE(admissions_carry_the_step_and_finishes_for_another_step_are_refused) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment());
  auto batch = [](uint64_t step) {
    step_batch b;
    b.step = step;
    for (uint64_t i = 0; i < 4; ++i)
      b.requests.push_back({i, 100, 0, -1});
    return b;
  };
  auto finish = [](uint64_t step, std::string engine, std::vector<uint64_t> ids) {
    requests_finished f{std::move(engine), step, {}};
    for (uint64_t i : ids)
      f.done.push_back({i, 10, int64_t(100 + i)});
    return f;
  };
  std::map<std::string, std::vector<uint64_t>> on; // each engine's requests, as admitted
  for (uint64_t step : {7, 8}) {
    BOOST_REQUIRE(rt.start_step(batch(step), 1) == deployment_runtime::step_admission::started);
    on.clear();
    rt.plan_now(1); // no planner: it places them itself
    for (auto& a : rt.take_commands()) {
      BOOST_CHECK_EQUAL(a.step, step);
      for (auto& r : a.requests)
        on[a.engine].push_back(r.id);
      rt.on_ack(ack_for(a), 1);
    }
    BOOST_REQUIRE_EQUAL(on.size(), 2u);
    auto wrong = rt.on_finished(finish(step + 5, "e0", on["e0"]), 2);
    BOOST_CHECK(wrong.fresh.empty());
    BOOST_CHECK_EQUAL(wrong.refused, fmt::format("step {} is not running (step {} is)", step + 5,
                                                 step));
    auto first = rt.on_finished(finish(step, "e0", on["e0"]), 3);
    BOOST_CHECK_MESSAGE(first.refused.empty() && !first.step_done, first.refused);
    auto right = rt.on_finished(finish(step, "e1", on["e1"]), 3);
    BOOST_CHECK(right.refused.empty());
    BOOST_REQUIRE(right.step_done);
    BOOST_CHECK(rt.on_finished(finish(step, "e1", on["e1"]), 4).refused.empty()); // repeat: Ok
  }
  BOOST_CHECK_EQUAL(rt.on_finished(finish(3, "e0", {0}), 5).refused,
                    "step 3 is not running (no step is)");
  // The step survives the wire on its admissions.
  gen_command admit;
  admit.kind = gen_command_kind::admit;
  admit.step = 8;
  v1::Envelope e;
  fill_command(e, admit, "gen");
  BOOST_CHECK_EQUAL(command_of(e, "e0")->step, 8u);
}

// An engine's load report that lists more requests than the step has is refused whole: no
// engine runs more, and one of any length would cost every later tick its length.
BOOST_AUTO_TEST_CASE(a_load_report_longer_than_the_step_is_refused) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment());
  auto admits = admitted_step(rt);
  BOOST_REQUIRE(!admits.empty());
  BOOST_CHECK(rt.on_stats(stats_of(admits[0], 1, 5), 1));
  auto padded = stats_of(admits[0], 1, 5);
  while (padded.requests.size() <= 8)
    padded.requests.push_back(padded.requests.front());
  BOOST_CHECK(!rt.on_stats(padded, 2));
  BOOST_CHECK(rt.on_stats(stats_of(admits[0], 1, 6), 3)); // the honest next tick is taken
}

// A step that can never finish does not hold the deployment: past step_timeout_s it is
// aborted, the engines release its requests, the next step starts.
BOOST_AUTO_TEST_CASE(a_step_past_its_timeout_is_aborted_and_the_next_one_runs) {
  auto engine = qwen14b();
  auto d = small_deployment();
  d.step_timeout_s = 100;
  auto rt = started(engine, d);
  auto admits = admitted_step(rt);
  BOOST_REQUIRE_EQUAL(admits.size(), 4u);
  for (double t = 1; t < 99; t += 1) { // the engines keep reporting: nothing is lost
    for (auto& a : admits)
      rt.on_stats(stats_of(a, 1, 5), t);
    BOOST_CHECK(!rt.expire(t));
    BOOST_CHECK_LE(*rt.next_deadline(), 100.0);
  }
  auto aborted = rt.expire(100);
  BOOST_REQUIRE(aborted);
  BOOST_CHECK(aborted->aborted);
  BOOST_CHECK_EQUAL(aborted->step, 0u);
  BOOST_CHECK_MESSAGE(aborted->reason.find("step_timeout_s = 100 s (8 of 8 requests left)")
                        != std::string::npos,
                      aborted->reason);
  size_t released = 0;
  for (auto& c : rt.take_commands()) {
    BOOST_CHECK(c.kind == gen_command_kind::migrate);
    released += c.moves.size();
  }
  BOOST_CHECK_EQUAL(released, 8u);
  auto records = rt.take_records();
  BOOST_CHECK(std::any_of(records.begin(), records.end(),
                          [](auto& r) { return r.kind == gen_record_kind::step_aborted; }));
  BOOST_CHECK(rt.done_outcome(0)->aborted); // a router asking again hears it too
  BOOST_CHECK(!rt.abort_step("again", 101));  // nothing runs
  // It survives a restart as the record says.
  deployment_runtime back{engine, d};
  back.restore(rt.record(), std::nullopt, {}, 0);
  BOOST_CHECK_EQUAL(back.done_outcome(0)->reason, aborted->reason);
  BOOST_CHECK(rt.start_step(batch_of(1, 8), 102) == deployment_runtime::step_admission::started);
}

// A TP16 instance spans both engines; only its leader reports it. The other engine is not
// taken for lost for its silence (OrchestrRL's cross-node configs, e.g. EP16 of a MoE).
BOOST_AUTO_TEST_CASE(an_instance_over_two_engines_is_reported_by_its_leader_alone) {
  auto engine = qwen14b();
  auto d = small_deployment();
  d.initial = parallel_config{16};
  auto rt = started(engine, d);
  BOOST_CHECK_EQUAL(rt.serving().name(), "1xTP16");
  rt.start_step(batch_of(0, 8), 0);
  rt.plan_now(0);
  auto admits = rt.take_commands();
  BOOST_REQUIRE_EQUAL(admits.size(), 1u);
  BOOST_CHECK_EQUAL(admits[0].engine, "e0");
  rt.on_ack(ack_for(admits[0]), 0);
  for (double t = 1; t <= 40; t += 1) {
    rt.on_stats(stats_of(admits[0], 1, int64_t(t)), t);
    rt.expire(t);
  }
  BOOST_CHECK_EQUAL(rt.status().counters.engines_lost, 0);
  BOOST_CHECK_EQUAL(rt.serving().name(), "1xTP16");
  requests_finished f{"e0", 0, {}};
  for (uint64_t i = 0; i < 8; ++i)
    f.done.push_back({i, 10, 100});
  BOOST_CHECK(rt.on_finished(f, 41).step_done);
}

// The engines of a spanning instance must find each other to build its process group: each
// one's reshard names them all, in slot order, with their GPUs and data channels, on the wire
// too. An instance within one engine needs no peers.
BOOST_AUTO_TEST_CASE(a_spanning_instance_s_reshard_names_its_engines_to_each_of_them) {
  auto engine = qwen14b();
  auto d = small_deployment();
  d.initial = parallel_config{16};
  deployment_runtime rt{engine, d};
  rt.join({"e0", "n0", 8, false, "tcp://e0:9"}, 0);
  rt.join({"e1", "n1", 8, false, "tcp://e1:9"}, 0);
  auto reshards = rt.take_commands();
  BOOST_REQUIRE_EQUAL(reshards.size(), 2u);
  for (auto& c : reshards) {
    BOOST_REQUIRE_EQUAL(c.peers.size(), 2u);
    BOOST_CHECK_EQUAL(c.peers[0].engine, c.slots.at(0).engines.at(0));
    BOOST_CHECK_EQUAL(c.peers[1].engine, c.slots.at(0).engines.at(1));
    for (auto& p : c.peers) {
      BOOST_CHECK_EQUAL(p.gpus, 8);
      BOOST_CHECK_EQUAL(p.data_address, fmt::format("tcp://{}:9", p.engine));
    }
    v1::Envelope e;
    fill_command(e, c, "gen");
    auto back = command_of(e, c.engine);
    BOOST_REQUIRE(back);
    BOOST_REQUIRE_EQUAL(back->peers.size(), 2u);
    BOOST_CHECK_EQUAL(back->peers[1].engine, c.peers[1].engine);
    BOOST_CHECK_EQUAL(back->peers[1].gpus, 8);
    BOOST_CHECK_EQUAL(back->peers[1].data_address, c.peers[1].data_address);
  }
  auto within = small_deployment();
  within.initial = parallel_config{8};
  deployment_runtime one{engine, within};
  one.join({"e0", "n0", 8, false, "tcp://e0:9"}, 0);
  for (auto& c : one.take_commands())
    BOOST_CHECK(c.peers.empty());
}

BOOST_AUTO_TEST_CASE(a_contiguous_dispatch_deals_the_batch_in_slices) {
  // veRL chunks a batch over its DP ranks: a GRPO group's samples, adjacent in the batch,
  // land on one instance.
  auto engine = qwen14b();
  auto d = small_deployment();
  d.dispatch = dispatch_mode::contiguous;
  auto rt = started(engine, d);
  BOOST_REQUIRE(rt.start_step(batch_of(0, 10), 1) == deployment_runtime::step_admission::started);
  BOOST_CHECK(!rt.plan_now(1));
  auto admits = rt.take_commands();
  BOOST_REQUIRE_EQUAL(admits.size(), 4u);
  std::map<uint32_t, std::vector<uint64_t>> ids;
  for (auto& a : admits)
    for (auto& r : a.requests)
      ids[a.instance].push_back(r.id);
  BOOST_REQUIRE_EQUAL(ids.size(), 4u);
  uint64_t next = 0;
  for (auto& [instance, list] : ids) { // slices of 2 or 3, in batch order
    BOOST_CHECK(list.size() == 2 || list.size() == 3);
    for (auto id : list)
      BOOST_CHECK_EQUAL(id, next++);
  }
  BOOST_CHECK_EQUAL(next, 10u);
}

namespace {

/// A planned step of 8 requests on 4 x TP4, two per instance; returns the admits (answered).
std::vector<gen_command> place_on_four(deployment_runtime& rt) {
  rt.start_step(batch_of(0, 8), 0);
  auto snap = rt.plan_now(0);
  BOOST_REQUIRE(snap);
  BOOST_CHECK_EQUAL(snap->pending.size(), 8u);
  BOOST_CHECK_EQUAL(snap->gpu_budget, 16);
  gen_decision keep;
  keep.deployment = snap->deployment;
  keep.assignment = {0, 1, 2, 3, 0, 1, 2, 3};
  rt.on_decision(keep, 0);
  auto admits = rt.take_commands();
  BOOST_REQUIRE_EQUAL(admits.size(), 4u);
  for (auto& a : admits)
    rt.on_ack(ack_for(a), 0);
  return admits;
}

/// Every drain answered with the requests `admits` put on its engine, 80 tokens in, KV kept.
void release_admitted(deployment_runtime& rt, const std::vector<gen_command>& drains,
                      const std::vector<gen_command>& admits, double now) {
  for (auto& d : drains) {
    std::vector<request_state> released;
    for (auto& a : admits)
      if (a.engine == d.engine)
        for (auto& r : a.requests)
          released.push_back({r.id, 100, 80, true, true});
    rt.on_ack(ack_for(d, released), now);
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(a_reconfiguration_drains_reshards_then_admits_as_planned) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment(true));
  auto admits = place_on_four(rt);
  // The tail: switch to 2xTP8 with everything on instance 1.
  for (auto& a : admits)
    rt.on_stats(stats_of(a, 1, 40), 5);
  BOOST_CHECK(!rt.plan_now(5)); // nothing unplaced: planning waits for its period
  auto early = rt.tick(5);
  BOOST_CHECK(!early.balance); // no balancer configured
  BOOST_CHECK(!early.plan);
  for (auto& a : admits)
    rt.on_stats(stats_of(a, 1, 80), 10);
  auto work = rt.tick(10);
  BOOST_REQUIRE(work.plan);
  BOOST_CHECK_EQUAL(work.plan->pending[0].generated, 80);
  BOOST_CHECK_EQUAL(work.plan->pending[0].instance, 0);
  BOOST_CHECK(work.plan->standby == std::vector{parallel_config{4}}); // what the engines ran
  gen_decision sw;
  sw.reconfigure = true;
  sw.deployment = {parallel_config{8}, 2};
  sw.assignment.assign(work.plan->pending.size(), 1);
  sw.switch_s = 4;
  sw.migrate_s = 1.5;
  rt.on_decision(sw, 20);
  auto drains = rt.take_commands();
  BOOST_REQUIRE_EQUAL(drains.size(), 2u);
  BOOST_CHECK(rt.take_dirty()); // durable before any engine hears of it
  BOOST_CHECK(rt.phase() == reconfig_phase::draining);
  BOOST_CHECK_EQUAL(rt.serving().name(), "2xTP8");
  // e0 releases its four, with their KV; e1 too.
  release_admitted(rt, drains, admits, 20);
  BOOST_CHECK(rt.phase() == reconfig_phase::resharding);
  auto reshards = rt.take_commands();
  BOOST_REQUIRE_EQUAL(reshards.size(), 2u);
  for (auto& r : reshards)
    BOOST_CHECK(r.config == parallel_config{8});
  for (auto& r : reshards)
    rt.on_ack(ack_for(r), 25);
  BOOST_CHECK(rt.phase() == reconfig_phase::admitting);
  auto resumed = rt.take_commands();
  BOOST_REQUIRE_EQUAL(resumed.size(), 1u); // everything on instance 1, led by e1
  BOOST_CHECK(resumed[0].resume);
  BOOST_CHECK_EQUAL(resumed[0].engine, "e1");
  BOOST_CHECK_EQUAL(resumed[0].requests.size(), 8u);
  // Prompts come from the step's router; each request's tokens (and its KV, when it moves
  // rather than being recomputed, App. A) from the engine that released it.
  BOOST_CHECK_EQUAL(resumed[0].router_address, "tcp://router:9");
  for (auto& r : resumed[0].requests) {
    BOOST_CHECK_EQUAL(r.generated, 80);
    BOOST_CHECK(r.kv_source == "e0" || r.kv_source == "e1");
    BOOST_CHECK_EQUAL(r.source_address, "tcp://" + r.kv_source + ":9");
  }
  rt.take_records();
  rt.on_ack(ack_for(resumed[0]), 26);
  BOOST_CHECK(rt.phase() == reconfig_phase::none);
  auto st = rt.status();
  BOOST_CHECK_EQUAL(st.counters.reconfigurations, 1);
  BOOST_CHECK_EQUAL(st.counters.kv_transfers + st.counters.kv_recomputes, 8);
  // §6.2.2's accounting: drain at 20 to the last admission at 26, as the engines answered;
  // the eight moved KVs (180 tokens each) onto TP8 as App. A prices them; the plan's C_sw + C_mig.
  auto records = rt.take_records();
  auto sw_done = std::find_if(records.begin(), records.end(),
                              [](auto& r) { return r.kind == gen_record_kind::switched; });
  BOOST_REQUIRE(sw_done != records.end());
  BOOST_CHECK_EQUAL(sw_done->detail, "4xTP4 -> 2xTP8");
  BOOST_CHECK_CLOSE(sw_done->switch_s, 6.0, 1e-9);
  BOOST_CHECK_CLOSE(sw_done->planned_s, 5.5, 1e-9);
  BOOST_CHECK_GT(sw_done->kv_s, 0);
  BOOST_CHECK_CLOSE(sw_done->kv_s, kv_move_cost_of(engine, parallel_config{8}, 8, 180).best_s(),
                    1e-9);
  // Both engines now keep TP4 and TP8 pre-mapped: a switch back skips their warm-up.
  rt.on_stats(stats_of(resumed[0], resumed[0].epoch, 90), 30);
  auto later = rt.tick(31);
  BOOST_REQUIRE(later.plan);
  BOOST_CHECK((later.plan->standby == std::vector{parallel_config{4}, parallel_config{8}}));
  // An engine whose process restarted lost its mappings: only what it ran since counts.
  rt.join({"e1", "n1", 8, true}, 32);
  rt.join({"e1", "n1", 8, false}, 32);
  ack_all(rt, rt.take_commands(), gen_command_kind::reshard, 33);
  rt.plan_failed();
  auto replan = rt.plan_now(33);
  BOOST_REQUIRE(replan);
  BOOST_CHECK(replan->standby == std::vector{parallel_config{8}});
}

BOOST_AUTO_TEST_CASE(a_mixed_deployment_runs_each_instance_s_own_config_and_is_restored) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment(true));
  auto admits = place_on_four(rt);
  for (auto& a : admits)
    rt.on_stats(stats_of(a, 1, 80), 10);
  auto work = rt.tick(10);
  BOOST_REQUIRE(work.plan);
  // The tail: four TP2 instances and one TP8 for the last four requests of the batch.
  gen_decision sw;
  sw.reconfigure = true;
  sw.deployment = {parallel_config{2}, 4, parallel_config{8}, 1};
  for (size_t i = 0; i < work.plan->pending.size(); ++i)
    sw.assignment.push_back(i < 4 ? int32_t(i) : 4);
  rt.on_decision(sw, 20);
  BOOST_CHECK_EQUAL(rt.serving().name(), "4xTP2+1xTP8");
  release_admitted(rt, rt.take_commands(), admits, 20);
  auto reshards = rt.take_commands();
  BOOST_REQUIRE_EQUAL(reshards.size(), 2u);
  std::map<std::string, std::vector<parallel_config>> carried;
  for (auto& r : reshards)
    for (auto& s : r.slots)
      carried[r.engine].push_back(s.config);
  BOOST_CHECK(carried["e0"] == std::vector<parallel_config>{parallel_config{8}});
  BOOST_CHECK(carried["e1"] == std::vector<parallel_config>(4, parallel_config{2}));
  for (auto& r : reshards)
    rt.on_ack(ack_for(r), 25);
  std::map<uint32_t, size_t> resumed;
  for (auto& a : rt.take_commands()) {
    resumed[a.instance] = a.requests.size();
    BOOST_CHECK_EQUAL(a.engine, a.instance == 4 ? "e0" : "e1");
    rt.on_ack(ack_for(a), 25);
  }
  BOOST_CHECK_EQUAL(resumed[4], 4u);
  BOOST_CHECK(rt.phase() == reconfig_phase::none);
  // The next plan sees the mixed deployment, its latency instance last.
  auto next = rt.tick(40);
  BOOST_REQUIRE(next.plan);
  BOOST_CHECK(next.plan->deployment == sw.deployment);
  // Each instance's config is durable.
  auto decoded = decode_gen_deployment(encode_gen_deployment("gen", rt.record()));
  BOOST_REQUIRE(decoded);
  deployment_runtime back{engine, small_deployment(true)};
  back.restore(*decoded, rt.current_step(), {}, 50);
  BOOST_CHECK_EQUAL(back.serving().name(), "4xTP2+1xTP8");
  BOOST_CHECK(back.status().instances == rt.status().instances);
}

BOOST_AUTO_TEST_CASE(between_steps_the_next_batch_s_deployment_is_set_up_before_it_comes) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment(true));
  BOOST_CHECK(!rt.next_step_snapshot()); // no step has run: nothing to foresee
  rt.start_step(batch_of(0, 8), 0);
  auto snap = rt.plan_now(0);
  BOOST_REQUIRE(snap);
  gen_decision keep;
  keep.deployment = snap->deployment;
  keep.assignment = {0, 1, 2, 3, 0, 1, 2, 3};
  rt.on_decision(keep, 0);
  auto admits = rt.take_commands();
  for (auto& a : admits)
    rt.on_ack(ack_for(a), 0);
  BOOST_CHECK(!rt.next_step_snapshot()); // the step still runs
  requests_finished on_e0{"e0", 0, {}}, on_e1{"e1", 0, {}};
  for (uint64_t i = 0; i < 8; ++i) // instances 0 and 1 are e0's
    (i % 4 < 2 ? on_e0 : on_e1).done.push_back({uint64_t(0) << 32 | i, 50, 100});
  BOOST_CHECK(!rt.on_finished(on_e0, 30).step_done);
  BOOST_REQUIRE(rt.on_finished(on_e1, 30).step_done);
  // The planner foresees step 1 as step 0's batch again, nothing generated, nothing placed.
  auto next = rt.next_step_snapshot();
  BOOST_REQUIRE(next);
  BOOST_CHECK_EQUAL(next->step, 1u);
  BOOST_CHECK_EQUAL(next->pending.size(), 8u);
  BOOST_CHECK(next->finished_outputs.empty());
  for (auto& p : next->pending)
    BOOST_CHECK(p.generated == 0 && p.instance == -1);
  BOOST_CHECK(!rt.next_step_snapshot()); // one at a time
  rt.plan_failed(); // the planner did not answer: asked again
  BOOST_REQUIRE(rt.next_step_snapshot());
  gen_decision wide;
  wide.reconfigure = true;
  wide.deployment = {parallel_config{2}, 8};
  rt.on_decision(wide, 30);
  BOOST_CHECK(rt.phase() == reconfig_phase::draining);
  auto drains = rt.take_commands();
  BOOST_REQUIRE_EQUAL(drains.size(), 2u);
  // Step 1 comes during the switch: it waits, then is placed on the new layout and planned on.
  BOOST_CHECK(rt.start_step(batch_of(1, 8), 31) == deployment_runtime::step_admission::started);
  BOOST_CHECK(!rt.plan_now(31));
  for (auto& d : drains)
    rt.on_ack(ack_for(d), 31);
  for (auto& r : rt.take_commands())
    rt.on_ack(ack_for(r), 33);
  auto resumed = rt.take_commands();
  size_t placed = 0;
  for (auto& a : resumed) {
    BOOST_CHECK(a.kind == gen_command_kind::admit);
    placed += a.requests.size();
    rt.on_ack(ack_for(a), 33);
  }
  BOOST_CHECK_EQUAL(placed, 8u);
  BOOST_CHECK(rt.phase() == reconfig_phase::none);
  BOOST_CHECK_EQUAL(rt.serving().name(), "8xTP2");
  BOOST_REQUIRE(rt.placement());
  for (auto& a : resumed)
    rt.on_stats(stats_of(a, rt.status().epoch, 10), 45);
  BOOST_CHECK(rt.tick(45).plan); // the step is planned on as usual
}

BOOST_AUTO_TEST_CASE(a_migration_releases_at_the_source_then_admits_at_the_destination) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment(false, true));
  rt.start_step(batch_of(0, 8), 0);
  rt.plan_now(0); // placed round-robin
  auto admits = rt.take_commands();
  for (auto& a : admits) {
    rt.on_ack(ack_for(a), 0);
    rt.on_stats(stats_of(a, 1, 10), 1);
  }
  BOOST_REQUIRE(rt.tick_due(1));
  auto work = rt.tick(1);
  BOOST_REQUIRE(work.balance);
  BOOST_CHECK_EQUAL(work.balance->size(), 4u);
  // Worker 0 (instance 0, on e0) gives request 0 to worker 3 (instance 3, on e1).
  rt.on_migrations({{0, 0, 3, false}}, 1);
  auto migrate = rt.take_commands();
  BOOST_REQUIRE_EQUAL(migrate.size(), 1u);
  BOOST_CHECK(migrate[0].kind == gen_command_kind::migrate);
  BOOST_CHECK_EQUAL(migrate[0].engine, "e0");
  BOOST_CHECK_EQUAL(migrate[0].moves[0].to, 3u);
  rt.on_ack(ack_for(migrate[0], {{0, 100, 10, true, true}}), 1);
  auto admit = rt.take_commands();
  BOOST_REQUIRE_EQUAL(admit.size(), 1u);
  BOOST_CHECK_EQUAL(admit[0].engine, "e1");
  BOOST_CHECK_EQUAL(admit[0].instance, 3u);
  BOOST_CHECK_EQUAL(admit[0].requests[0].generated, 10);
  auto cost = kv_move_cost_of(engine, parallel_config{4}, 1, 110);
  BOOST_CHECK_EQUAL(admit[0].requests[0].kv_transfer, !cost.recompute());
  BOOST_CHECK_EQUAL(rt.status().counters.migrations, 1);
  // A tick with stale loads (request 0 already moved) does not move it again.
  rt.on_migrations({{0, 0, 1, false}}, 2);
  BOOST_CHECK(rt.take_commands().empty());
}

BOOST_AUTO_TEST_CASE(a_lost_engine_takes_its_instances_and_its_requests_start_again) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment(true));
  rt.start_step(batch_of(0, 8), 0);
  auto snap = rt.plan_now(0);
  gen_decision keep;
  keep.deployment = snap->deployment;
  keep.assignment = {0, 1, 2, 3, 0, 1, 2, 3};
  rt.on_decision(keep, 0);
  for (auto& a : rt.take_commands())
    rt.on_ack(ack_for(a), 0);
  rt.lose("e1", "killed", 5);
  BOOST_CHECK_EQUAL(rt.serving().name(), "2xTP4");
  auto again = rt.plan_now(5);
  BOOST_REQUIRE(again);
  BOOST_CHECK_EQUAL(again->gpu_budget, 8);
  int unplaced = 0;
  for (auto& p : again->pending) {
    unplaced += p.instance < 0 ? 1 : 0;
    if (p.instance < 0)
      BOOST_CHECK_EQUAL(p.generated, 0);
  }
  BOOST_CHECK_EQUAL(unplaced, 4); // the ones on instances 2 and 3
  BOOST_CHECK_EQUAL(rt.status().counters.engines_lost, 1);
  auto records = rt.take_records();
  BOOST_CHECK(std::any_of(records.begin(), records.end(),
                          [](auto& r) { return r.kind == gen_record_kind::engine_lost; }));
}

BOOST_AUTO_TEST_CASE(a_command_not_answered_is_sent_again_then_its_engine_is_lost) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment());
  rt.start_step(batch_of(0, 8), 0);
  rt.plan_now(0);
  auto admits = rt.take_commands();
  for (auto& a : admits)
    if (a.engine == "e0")
      rt.on_ack(ack_for(a), 0);
  auto due = rt.next_deadline();
  BOOST_REQUIRE(due);
  BOOST_CHECK_CLOSE(*due, 5.0, 1e-9); // command_timeout_s
  rt.expire(5);
  auto resent = rt.take_commands();
  BOOST_REQUIRE_EQUAL(resent.size(), 2u); // e1's two admits, same ids
  BOOST_CHECK_EQUAL(resent[0].engine, "e1");
  BOOST_CHECK_EQUAL(rt.status().counters.commands_retried, 2);
  for (auto& a : admits) // e0 reports; e1 stays silent
    if (a.engine == "e0")
      rt.on_stats(stats_of(a, 1, 5), 8);
  rt.expire(10); // one retry allowed: now abandoned, e1 is lost
  BOOST_CHECK_EQUAL(rt.status().counters.commands_abandoned, 1);
  BOOST_CHECK_EQUAL(rt.status().counters.engines_lost, 1);
  BOOST_CHECK_EQUAL(rt.serving().name(), "2xTP4");
}

BOOST_AUTO_TEST_CASE(a_restored_runtime_resumes_where_the_record_stood) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment());
  rt.start_step(batch_of(3, 8), 0);
  rt.plan_now(0);
  auto admits = rt.take_commands();
  for (auto& a : admits)
    if (a.instance != 2)
      rt.on_ack(ack_for(a), 0); // instance 2's admit is in flight at the crash
  rt.on_finished({"e0", 3, {{3 << 0 | (uint64_t(3) << 32), 10, 42}}}, 1);
  auto record = rt.record();
  auto bytes = encode_gen_deployment("gen", record);
  auto decoded = decode_gen_deployment(bytes);
  BOOST_REQUIRE(decoded);
  BOOST_CHECK_EQUAL(decoded->commands.size(), 1u);
  BOOST_CHECK_EQUAL(decoded->instances.size(), 4u);
  deployment_runtime back{engine, small_deployment()};
  back.restore(*decoded, rt.current_step(), {{uint64_t(3) << 32 | 3, 10, 42}}, 100);
  BOOST_CHECK_EQUAL(back.serving().name(), "4xTP4");
  auto st = back.status();
  BOOST_CHECK(st.step_active);
  BOOST_CHECK_EQUAL(st.step, 3u);
  BOOST_CHECK_EQUAL(st.finished, 1);
  // An engine coming back gets the command it may have missed, with the same id.
  back.join({"e1", "n1", 8, false}, 101);
  auto again = back.take_commands();
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_CHECK_EQUAL(again[0].id, admits[2].id);
  // e0 never comes back: lost after the grace (timeout x (retries + 1)); e1 reports.
  back.on_stats(stats_of(admits[3], 1, 5), 108);
  back.expire(100 + 5 * 2 + 1);
  BOOST_CHECK_EQUAL(back.status().counters.engines_lost, 1);
  BOOST_CHECK_EQUAL(back.serving().name(), "2xTP4");
}

// An operator's layout (`loom generation reconfigure`) runs the drain-reshard-admit sequence a
// planner's switch does, over as many instances as the engines hold, and says why when it
// cannot be.
BOOST_AUTO_TEST_CASE(an_operators_layout_is_switched_to_as_a_plan_is) {
  auto engine = qwen14b();
  auto rt = started(engine, small_deployment(true));
  BOOST_CHECK_EQUAL(rt.force_layout(parallel_config{4}, 1).value_or(""), "it already serves 4xTP4");
  BOOST_CHECK_EQUAL(rt.force_layout(parallel_config{32}, 1).value_or(""),
                    "no TP32 instance fits the engines registered");
  auto admits = place_on_four(rt);
  BOOST_CHECK(!rt.force_layout(parallel_config{16}, 1)); // mid-step, nothing in flight: at once
  BOOST_CHECK(rt.take_dirty());
  BOOST_CHECK(rt.phase() == reconfig_phase::draining);
  BOOST_CHECK_EQUAL(rt.force_layout(parallel_config{8}, 1).value_or(""),
                    "a reconfiguration is under way");
  auto drains = rt.take_commands();
  BOOST_REQUIRE_EQUAL(drains.size(), 2u);
  release_admitted(rt, drains, admits, 2);
  ack_all(rt, rt.take_commands(), gen_command_kind::reshard, 3);
  auto resumed = rt.take_commands();
  BOOST_REQUIRE_EQUAL(resumed.size(), 1u); // one TP16 instance over both engines, led by one
  BOOST_CHECK_EQUAL(resumed[0].requests.size(), 8u);
  rt.on_ack(ack_for(resumed[0]), 4);
  BOOST_CHECK(rt.phase() == reconfig_phase::none);
  BOOST_CHECK_EQUAL(rt.serving().name(), "1xTP16");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire_forms)

BOOST_AUTO_TEST_CASE(commands_and_stats_survive_the_wire) {
  gen_command c;
  c.id = 9;
  c.engine = "e1";
  c.kind = gen_command_kind::admit;
  c.epoch = 4;
  c.instance = 2;
  c.resume = true;
  c.requests = {{1, 10, 5, true, "e0"}, {2, 20, 0, false, {}}};
  v1::Envelope e;
  fill_command(e, c, "dep");
  BOOST_CHECK_EQUAL(e.admit_requests().deployment(), "dep");
  auto back = command_of(e, "e1");
  BOOST_REQUIRE(back);
  BOOST_CHECK_EQUAL(back->id, 9u);
  BOOST_CHECK(back->resume);
  BOOST_CHECK_EQUAL(back->requests[0].kv_source, "e0");
  BOOST_CHECK_EQUAL(back->requests[1].prompt_tokens, 20);
  gen_command r;
  r.id = 3;
  r.kind = gen_command_kind::reshard;
  r.epoch = 5;
  r.config = parallel_config::expert_parallel(16, 2);
  r.slots = {{0, {"a", "b"}, r.config}, {1, {"a"}, parallel_config{8}}};
  v1::Envelope re;
  fill_command(re, r, "dep");
  auto rback = command_of(re, "a");
  BOOST_REQUIRE(rback);
  BOOST_CHECK(rback->kind == gen_command_kind::reshard);
  BOOST_CHECK(rback->config == r.config);
  BOOST_CHECK(rback->slots == r.slots);
  // A peer that names no slot config means the Reconfigure's.
  re.mutable_reconfigure()->mutable_slots(1)->clear_config();
  BOOST_CHECK(command_of(re, "a")->slots[1].config == r.config);
  instance_stats s;
  s.instance = 1;
  s.epoch = 2;
  s.requests = {{5, 100, 7, true, true}, {6, 50, 0, false, false}};
  s.kv_capacity_tokens = 1000;
  s.kv_free_tokens = 250;
  s.max_batch = 64;
  s.decode_rate_tps = 31.5;
  v1::GenStats m;
  fill(m, s, "dep");
  BOOST_CHECK_EQUAL(m.running(), 1u);
  BOOST_CHECK_EQUAL(m.queued(), 1u);
  auto sb = stats_of(m, "e3");
  BOOST_CHECK_EQUAL(sb.engine, "e3");
  BOOST_CHECK_EQUAL(sb.kv_free_tokens, 250);
  BOOST_CHECK_EQUAL(sb.requests[1].prompt_tokens, 50);
}

BOOST_AUTO_TEST_CASE(the_store_keeps_steps_finishes_and_forecasts) {
  step_record s{7, {{1, 10, 0, -1}, {2, 20, 0, -1}}};
  auto sb = decode_gen_step(encode_gen_step("dep", s));
  BOOST_REQUIRE(sb);
  BOOST_CHECK_EQUAL(sb->step, 7u);
  BOOST_CHECK_EQUAL(sb->requests[1].prompt_tokens, 20);
  auto d = decode_request_done(encode_request_done({5, 77, 123}));
  BOOST_REQUIRE(d);
  BOOST_CHECK_EQUAL(d->output_tokens, 77);
  gen_forecast h{{{0.5, 0.5}, {0.25, 0.75}}, {0.04, -0.02}};
  BOOST_CHECK(decode_gen_forecast(encode_gen_forecast(h)) == h);
  // Keys sort by step, then request: a step's finishes scan by the step key's prefix.
  BOOST_CHECK_LT(gen_step_key("dep", 9), gen_step_key("dep", 10));
  BOOST_CHECK(gen_finished_key("dep", 9, 1).starts_with(gen_step_key("dep", 9) + "/"));
  BOOST_CHECK(!decode_gen_deployment("not a record"));
}

BOOST_AUTO_TEST_SUITE_END()
