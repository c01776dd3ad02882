#define BOOST_TEST_MODULE gen_replay
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>
#include <cmath>
#include <boost/algorithm/string/replace.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "generation/balancer.hpp"
#include "generation/gen_planner.hpp"
#include "generation/remaining_workload.hpp"
#include "loom.pb.h"
#include "metrics/metrics.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/gen_codecs.hpp"
#include "replay/driver.hpp"
#include "replay/gen_run.hpp"
#include "replay/gen_scenario.hpp"
#include "replay/gen_workload.hpp"
#include "replay/sim_generation.hpp"
#include "store/database.hpp"
#include "store/store_actor.hpp"
#include "support/process.hpp"
#include "types/gpu.hpp"

using namespace loom;

namespace {

gen_snapshot batch_snapshot(uint64_t step, size_t n) {
  gen_snapshot s;
  s.step = step;
  s.deployment = {2, 4};
  for (size_t i = 0; i < n; ++i)
    s.pending.push_back({i, 100, 0, -1});
  return s;
}

engine_model qwen14b() {
  return engine_model{*find_model("Qwen2.5-14B"), *find_builtin_gpu("H800")};
}

/// Steps of `batch` requests: every `long_every`-th output is `long_tokens`, the rest short.
std::vector<std::vector<replay::gen_sample>> two_length_steps(int steps, int batch,
                                                              int long_every,
                                                              int64_t long_tokens) {
  std::vector<std::vector<replay::gen_sample>> out(static_cast<size_t>(steps));
  for (auto& s : out)
    for (int i = 0; i < batch; ++i)
      s.push_back({300, i % long_every == 0 ? long_tokens : 200 + 10 * (i % 7)});
  return out;
}

struct actor_run {
  replay::gen_run_log log;
  std::vector<v1::Event> events;
  std::optional<gen_forecast> forecast; // what the planner stored
};

/// Runs a deployment of `initial` over 8-GPU engines on the virtual clock, as `loom replay`
/// does: the real controller with the planner (over a RocksDB store in a temp dir) and the
/// balancer as asked, against the simulated framework.
actor_run run_engines(gen_deployment initial, std::vector<std::vector<replay::gen_sample>> steps,
                      bool with_planner, bool with_balancer, balancer_params bp = {},
                      double plan_interval_s = 10, size_t curve_step = 0) {
  test::temp_dir dir;
  deployment_config dep;
  dep.name = "gen";
  dep.model = "Qwen2.5-14B";
  dep.gpu = "H800";
  dep.gpus = initial.parallel.gpus() * initial.instances;
  dep.initial = initial.parallel;
  dep.max_tokens = 8192;
  dep.planner_enabled = with_planner;
  dep.balancer_enabled = with_balancer;
  dep.period_s = plan_interval_s;
  dep.tick_s = 1;
  dep.balancer = bp;
  replay::sim_generation_config sim;
  sim.gpus_per_engine = 8;
  sim.engines = dep.gpus / 8;
  sim.loaded = initial.parallel;
  sim.steps = std::move(steps);
  sim.curve_step = curve_step;
  auto store_dir = (dir.path() / "store").string();
  auto log = replay::run_generation(qwen14b(), {dep, sim, store_dir});
  actor_run out;
  if (log)
    out.log = std::move(*log);
  else
    out.log.error = message_of(log.error());
  auto db = database::open(store_dir);
  BOOST_REQUIRE(db);
  auto events = (*db)->read_events(0, 100000);
  BOOST_REQUIRE(events);
  for (auto& r : *events) {
    v1::Event e;
    BOOST_REQUIRE(e.ParseFromString(r.value));
    out.events.push_back(e);
  }
  if (auto f = (*db)->get(record_kind::gen_forecasts, "gen"); f && *f)
    out.forecast = decode_gen_forecast(**f);
  return out;
}

size_t count_events(const actor_run& run, const std::string& kind) {
  return size_t(std::count_if(run.events.begin(), run.events.end(),
                              [&](auto& e) { return e.kind() == kind; }));
}

std::string small_scenario(const std::string& policies) {
  return fmt::format(R"([scenario]
name = "small-gen"
kind = "generation"
seed = 3
policies = [{}]

[deployment]
model = "Qwen2.5-14B"
gpu = "H800"
gpus = 8

[planner]
interval_s = 5

[workload]
steps = 4
batch = 192
max_tokens = 8192
median_tokens = 1200
sigma = 1.0
)",
                     policies);
}

} // namespace

BOOST_AUTO_TEST_SUITE(remaining_workload_core)

BOOST_AUTO_TEST_CASE(first_step_is_planned_at_the_maximum_then_forecast_from_history) {
  remaining_workload w{256, 2048, 8};
  auto first = batch_snapshot(0, 4);
  w.observe(first);
  for (auto& r : w.estimate(first)) {
    BOOST_CHECK_EQUAL(r.remaining, 2048); // nothing seen yet: every request may run to the cap
    BOOST_CHECK_EQUAL(r.context, 100);
  }
  BOOST_CHECK(!w.end_step(0, {100, 300, 300, 1000})); // no forecast to score
  // Step 1 is forecast from step 0 (the only history): its histogram exactly.
  auto second = batch_snapshot(1, 4);
  w.observe(second);
  auto est = w.estimate(second);
  BOOST_CHECK_EQUAL(est.front().remaining, 1024); // rank matching: the longest bin is 1024
  auto error = w.end_step(1, {100, 300, 300, 1000});
  BOOST_REQUIRE(error);
  BOOST_CHECK_SMALL(error->histogram, 1e-9);
  BOOST_CHECK_SMALL(error->mean_length, 1e-9);
  // A different step is scored: half the mass moved from one bin to another.
  w.observe(batch_snapshot(2, 4));
  auto moved = w.end_step(2, {100, 300, 1000, 1000});
  BOOST_REQUIRE(moved);
  BOOST_CHECK_CLOSE(moved->histogram, 0.5, 1e-6);
  BOOST_CHECK_GT(moved->mean_length, 0.1);
}

BOOST_AUTO_TEST_CASE(the_estimate_is_informed_by_a_learned_step_or_half_the_batch) {
  remaining_workload w{256, 2048, 8};
  auto start = batch_snapshot(0, 4);
  w.observe(start);
  BOOST_CHECK(!w.informed()); // every request at the cap: the planner must not switch on it
  auto one_done = batch_snapshot(0, 3);
  one_done.finished_outputs = {100};
  w.observe(one_done);
  BOOST_CHECK(!w.informed()); // the shortest finish says little of the tail
  auto half_done = batch_snapshot(0, 2);
  half_done.finished_outputs = {120};
  w.observe(half_done);
  BOOST_CHECK(w.informed());
  w.end_step(0, {100, 120, 300, 1000});
  w.observe(batch_snapshot(1, 4)); // the next step starts from a forecast
  BOOST_CHECK(w.informed());
}

BOOST_AUTO_TEST_CASE(finishes_and_progress_correct_the_histogram) {
  remaining_workload w{256, 2048, 8};
  w.observe(batch_snapshot(0, 4));
  BOOST_CHECK_EQUAL(w.histogram().pending(), 4.0);
  auto later = batch_snapshot(0, 3);
  later.finished_outputs = {50};
  for (auto& p : later.pending)
    p.generated = 600;
  w.observe(later);
  BOOST_CHECK_EQUAL(w.histogram().pending(), 3.0);
  for (auto& r : w.estimate(later)) {
    BOOST_CHECK_EQUAL(r.context, 700);
    BOOST_CHECK_GE(r.remaining, 1);
    BOOST_CHECK_LE(r.remaining, 2048 - 600);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(actors_on_the_virtual_clock)

BOOST_AUTO_TEST_CASE(planner_reshapes_the_deployment_for_the_tail_and_persists_it_first) {
  // Four TP=2 instances on 8 GPUs; the short majority finishes early, the long tail runs
  // faster on wide TP instances.
  auto steps = two_length_steps(3, 256, 32, 8000);
  auto run = run_engines({2, 4}, steps, true, true, {}, 5, 1);
  BOOST_REQUIRE_MESSAGE(run.log.done, run.log.error);
  BOOST_CHECK_EQUAL(run.log.makespans.size(), 3u);
  BOOST_CHECK_GE(run.log.reconfigurations, 1);
  bool to_tp8 = false;
  for (auto& t : run.log.timeline)
    to_tp8 |= t.find("-> 1xTP8") != std::string::npos;
  BOOST_CHECK(to_tp8);
  // Every reconfiguration the engines obeyed is an event in RocksDB, in the same order, and
  // every step's start and end.
  BOOST_CHECK_EQUAL(count_events(run, "gen_reconfigured"), size_t(run.log.reconfigurations));
  BOOST_CHECK_EQUAL(count_events(run, "gen_step_started"), 3u);
  BOOST_CHECK_EQUAL(count_events(run, "gen_step_done"), 3u);
  // Steps after the first are forecast and scored; the forecaster's history is stored.
  BOOST_CHECK_EQUAL(run.log.forecast_histogram_error.size(), 2u);
  BOOST_REQUIRE(run.forecast);
  BOOST_CHECK_EQUAL(run.forecast->history.size(), 3u);
  // Its comparisons, scored again on the true lengths, are stored with it (plan_error).
  BOOST_CHECK(!run.forecast->plan_errors.empty());
  for (double e : run.forecast->plan_errors)
    BOOST_CHECK(e >= 0 && e < 10);
  // The recorded step's remaining-requests curve starts full and ends empty, never rising.
  BOOST_REQUIRE_GE(run.log.curve.size(), 3u);
  BOOST_CHECK_EQUAL(run.log.curve.front().second, 256);
  BOOST_CHECK_EQUAL(run.log.curve.back().second, 0);
  for (size_t i = 1; i < run.log.curve.size(); ++i)
    BOOST_CHECK_LE(run.log.curve[i].second, run.log.curve[i - 1].second);
  // And it beat the static deployment on the same steps.
  auto fixed = run_engines({2, 4}, steps, false, false);
  BOOST_REQUIRE(fixed.log.done);
  double adaptive = 0, still = 0;
  for (size_t i = 0; i < 3; ++i) {
    adaptive += run.log.makespans[i];
    still += fixed.log.makespans[i];
  }
  BOOST_TEST_MESSAGE("4xTP2 static " << still << " s, planner + balancer " << adaptive << " s");
  BOOST_CHECK_LT(adaptive, still);
  BOOST_CHECK_EQUAL(count_events(fixed, "gen_reconfigured"), 0u);
}

BOOST_AUTO_TEST_CASE(balancer_moves_work_off_the_straggler) {
  // Dealt round-robin over two TP4 instances, every long request lands on instance 0.
  auto steps = two_length_steps(1, 64, 2, 5000);
  balancer_params bp;
  bp.theta = 0.01;
  auto balanced = run_engines({4, 2}, steps, false, true, bp);
  auto alone = run_engines({4, 2}, steps, false, false);
  BOOST_REQUIRE(balanced.log.done && alone.log.done);
  BOOST_CHECK_GT(balanced.log.migrations, 0);
  BOOST_CHECK_EQUAL(alone.log.migrations, 0);
  // Only requests with KV on the source pay for a transfer or a recompute.
  BOOST_CHECK_LE(balanced.log.kv_transfers + balanced.log.kv_recomputes,
                 balanced.log.migrations);
  BOOST_TEST_MESSAGE("straggler: alone " << alone.log.makespans[0] << " s, balanced "
                                         << balanced.log.makespans[0] << " s, "
                                         << balanced.log.migrations << " migrations");
  BOOST_CHECK_LT(balanced.log.makespans[0], alone.log.makespans[0]);
}

// An instance over two engines (TP16 on two 8-GPU nodes) is reported by its leader alone; the
// other engine is not taken for lost, and every step ends (it hung before: engine-1 was lost
// for its silence and no TP16 fitted the GPUs left).
BOOST_AUTO_TEST_CASE(a_cross_node_instance_runs_its_steps_to_the_end) {
  auto run = run_engines({parallel_config{16}, 1}, two_length_steps(2, 32, 4, 3000), false,
                         false);
  BOOST_CHECK_MESSAGE(run.log.error.empty(), run.log.error);
  BOOST_CHECK_EQUAL(count_events(run, "gen_engine_lost"), 0u);
  BOOST_CHECK_EQUAL(count_events(run, "gen_step_aborted"), 0u);
  BOOST_CHECK_EQUAL(count_events(run, "gen_step_done"), 2u);
}

BOOST_AUTO_TEST_CASE(a_request_no_instance_can_hold_stops_the_run_with_the_reason) {
  auto run = run_engines({1, 8}, {{{300, 100}, {50'000'000, 100}}}, false, false);
  BOOST_CHECK(!run.log.done);
  BOOST_CHECK_MESSAGE(run.log.error.find("does not fit the KV cache") != std::string::npos,
                      run.log.error);
}

BOOST_AUTO_TEST_CASE(the_balancer_actor_answers_what_the_core_plans) {
  replay::driver d;
  auto bal = d.system().spawn(balancer, balancer_params{});
  std::vector<gen_worker> workers(2);
  workers[0].id = 0;
  workers[1].id = 1;
  for (uint64_t i = 0; i < 8; ++i)
    workers[0].waiting.push_back({i, 100 + int64_t(i)});
  workers[0].running.push_back({100, 500});
  workers[0].kv_free_tokens = 0;
  workers[1].kv_free_tokens = 100000;
  workers[0].decode_rate_tps = workers[1].decode_rate_tps = 1000;
  workers[0].pace_tps = workers[1].pace_tps = 1000;
  auto expected_workers = workers;
  auto expected = plan_migrations(expected_workers, {});
  BOOST_REQUIRE(!expected.empty());
  BOOST_CHECK(expected.front().was_waiting); // waiting queue first
  std::vector<migration> got;
  caf::scoped_actor self{d.system()};
  self->send(bal, balance_atom::value, workers);
  d.run_to_quiescence();
  self->receive([&](std::vector<migration>& moves) { got = moves; });
  BOOST_REQUIRE_EQUAL(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    BOOST_CHECK_EQUAL(got[i].request, expected[i].request);
    BOOST_CHECK_EQUAL(got[i].to, 1u);
    BOOST_CHECK_EQUAL(got[i].was_waiting, expected[i].was_waiting);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(generation_replay)

BOOST_AUTO_TEST_CASE(the_same_scenario_and_seed_give_identical_report_bytes) {
  test::temp_dir dir;
  test::write_file(dir / "s.toml", small_scenario(R"("orchestr", "static-tp8", "static-best",
                                                     "balancer-only", "planner-only")"));
  auto a = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "a"});
  auto b = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "b"});
  BOOST_REQUIRE_EQUAL(a.exit_code, 0);
  BOOST_REQUIRE_EQUAL(b.exit_code, 0);
  auto ra = test::read_file(dir / "a/report.json");
  BOOST_CHECK(ra == test::read_file(dir / "b/report.json"));
  auto report = nlohmann::json::parse(ra);
  BOOST_CHECK_EQUAL(report["scenario"], "small-gen");
  BOOST_CHECK_EQUAL(report["seed"], 3);
  auto& p = report["policies"];
  for (auto name : {"static-best", "static-tp8", "planner-only", "balancer-only", "orchestr"}) {
    BOOST_REQUIRE(p.contains(name));
    for (auto key : {"makespan_s", "samples_per_s", "reconfigurations", "migrations",
                     "forecast_rel_error", "remaining_curve"})
      BOOST_CHECK_MESSAGE(p[name].contains(key), name << " lacks " << key);
  }
  // static-best is the best of its own sweep, and static-tp8 is the sweep's TP=8 run.
  double best = 0;
  for (auto& [tp, sps] : p["static-best"]["sweep_samples_per_s"].items())
    best = std::max(best, sps.get<double>());
  BOOST_CHECK_EQUAL(p["static-best"]["samples_per_s"].get<double>(), best);
  BOOST_CHECK_EQUAL(p["static-tp8"]["samples_per_s"].get<double>(),
                    p["static-best"]["sweep_samples_per_s"]["tp8"].get<double>());
  BOOST_CHECK_EQUAL(p["static-best"]["reconfigurations"], 0);
  BOOST_CHECK(p["static-best"]["forecast_rel_error"].is_null());
  BOOST_CHECK(!p["orchestr"]["forecast_rel_error"].is_null());
  BOOST_CHECK_EQUAL(p["planner-only"]["migrations"], 0);
  BOOST_CHECK_EQUAL(p["balancer-only"]["reconfigurations"], 0);
  // Solve times are wall clock: timings.json, not the report.
  auto timings = nlohmann::json::parse(test::read_file(dir / "a/timings.json"));
  BOOST_CHECK(timings["policies"]["orchestr"].contains("solve_ms"));
  BOOST_CHECK(a.out.find("orchestr") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(static_best_is_swept_over_every_config_and_both_deals) {
  // The roofline scores AFD, so the sweep has its one-node splits beside veRL-TO's TPs; a
  // scenario dealt in contiguous slices also sweeps round-robin, and static-best is the best of
  // all, with balancer-only dealt as it was. static-tp8 stays veRL-LO as the scenario deals it.
  test::temp_dir dir;
  test::write_file(dir / "s.toml",
                   small_scenario(R"("static-best", "static-tp8", "balancer-only")")
                     + "dispatch = \"contiguous\"\n");
  auto r = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "o"});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto p = nlohmann::json::parse(test::read_file(dir / "o/report.json"))["policies"];
  auto& sweep = p["static-best"]["sweep_samples_per_s"];
  double best = 0;
  std::string best_key;
  size_t afd = 0;
  for (auto& [key, sps] : sweep.items()) {
    afd += key.rfind("afd", 0) == 0;
    if (sps.get<double>() > best)
      best = sps.get<double>(), best_key = key;
  }
  BOOST_CHECK_GT(afd, 0u);
  for (auto tp : {"tp1", "tp2", "tp4", "tp8"}) {
    BOOST_CHECK(sweep.contains(tp));
    BOOST_CHECK(sweep.contains(std::string(tp) + " round-robin"));
  }
  BOOST_CHECK_EQUAL(p["static-best"]["samples_per_s"].get<double>(), best);
  const bool round_robin = best_key.find("round-robin") != std::string::npos;
  BOOST_CHECK_EQUAL(p["static-best"]["dispatch"], round_robin ? "round-robin" : "contiguous");
  BOOST_CHECK_EQUAL(p["static-tp8"]["samples_per_s"].get<double>(), sweep["tp8"].get<double>());
  BOOST_CHECK_EQUAL(p["balancer-only"]["initial_deployment"],
                    p["static-best"]["initial_deployment"]);
}

// Qwen2.5-14B on 16 H100 under the roofline: the forecast ranks 2 x TP8 ahead of 4 x TP4 for a
// whole batch, which it is not. The planner that kept the tail's TP8 into the next batches, and
// switched on gains within its forecast's error, lost 2.8% to static-best here (seed 29, 0.972);
// a start weighed with its later tail switch, and switches held to the measured error, do not.
// A check of decisions: the sanitized build runs the same planner code in the cases above, and
// skips this one (20 s there).
BOOST_AUTO_TEST_CASE(the_planner_does_not_lose_where_its_forecast_misranks_the_configs) {
  if (test::sanitized)
    return;
  test::temp_dir dir;
  test::write_file(dir / "s.toml", R"([scenario]
name = "h100-roofline"
kind = "generation"
seed = 29
policies = ["static-best", "planner-only"]

[deployment]
model = "Qwen2.5-14B"
gpu = "H100"
gpus = 16

[workload]
steps = 6
batch = 1024
max_tokens = 25600
median_tokens = 2600
sigma = 0.9
drift_per_step = 0.03
)");
  auto r = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "o"});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto report = nlohmann::json::parse(test::read_file(dir / "o/report.json"));
  const double planner = report["throughput_vs_static_best"]["planner-only"].get<double>();
  BOOST_TEST_MESSAGE("planner-only " << planner << "x static-best");
  BOOST_CHECK_GE(planner, 0.99);
  BOOST_CHECK_GT(report["policies"]["planner-only"]["reconfigurations"].get<int64_t>(), 0);
}

// With no KV path between instances (every move recomputes its KV on the destination), a
// worker's rate collapses in the ticks it spends recomputing what it was sent; a balancer that
// took those rates for its pace moved 6,579 requests back and forth and lost 13% to static-best
// here (0.78-0.87 on seeds 25-27). Judged on smoothed paces and their spread, it does not.
BOOST_AUTO_TEST_CASE(the_balancer_does_not_lose_when_every_move_recomputes) {
  test::temp_dir dir;
  test::write_file(dir / "s.toml", fmt::format(R"([scenario]
name = "recompute-only"
kind = "generation"
seed = 25
policies = ["static-best", "balancer-only"]

[deployment]
model = "Qwen2.5-14B"
gpu = "H800"
gpus = 16
profile = "{}"

[kv]
nic_gbps = 0.001

[workload]
steps = 3
batch = 1024
max_tokens = 25600
median_tokens = 2600
sigma = 0.9
drift_per_step = 0.03
)", test::source_path("conf/profiles/h800-qwen2.5-14b.toml")));
  auto r = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "o"});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto report = nlohmann::json::parse(test::read_file(dir / "o/report.json"));
  const auto& bal = report["policies"]["balancer-only"];
  BOOST_TEST_MESSAGE("balancer-only " << report["throughput_vs_static_best"]["balancer-only"]
                                      << "x static-best, " << bal["migrations"] << " moves");
  BOOST_CHECK_GE(report["throughput_vs_static_best"]["balancer-only"].get<double>(), 0.99);
  BOOST_CHECK_EQUAL(bal["kv_transfers"].get<int64_t>(), 0); // the case it is about
}

// A static config whose step outlasts step_timeout_s drops out of the sweep with the reason; the
// replay goes on (it failed whole before: the aborted step's answer went to the controller
// itself, and the run stopped with request_receiver_down). On this scenario TP1's steps take
// 128-130 s and every other config's 77-106 s.
BOOST_AUTO_TEST_CASE(a_static_config_past_its_step_timeout_leaves_the_sweep_with_the_reason) {
  test::temp_dir dir;
  auto text = small_scenario(R"("static-best", "static-tp8")");
  boost::replace_first(text, "gpus = 8\n", "gpus = 8\nstep_timeout_s = 115\n");
  test::write_file(dir / "s.toml", text);
  auto r = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "o"});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto best = nlohmann::json::parse(test::read_file(dir / "o/report.json"))["policies"]
                                   ["static-best"];
  BOOST_CHECK(!best["sweep_samples_per_s"].contains("tp1"));
  BOOST_CHECK(best["sweep_samples_per_s"].contains("tp2"));
  BOOST_REQUIRE(best.contains("sweep_failed"));
  auto why = best["sweep_failed"]["tp1"].get<std::string>();
  BOOST_CHECK_MESSAGE(why.find("step 0 aborted") != std::string::npos
                        && why.find("step_timeout_s = 115") != std::string::npos,
                      why);
  BOOST_CHECK_GT(best["samples_per_s"].get<double>(), 0);
}

BOOST_AUTO_TEST_CASE(one_step_async_overlaps_each_step_with_the_previous_training) {
  // OrchestrRL §2 Fig. 1c: generation k+1 starts with training k, on weights one step stale.
  // The same batches and the same static deployment, synchronous and one step asynchronous,
  // with a trainer's step shorter than a generation step: the async run's steps follow each
  // other without the trainer's gap and its RL time is the recurrence of that overlap.
  test::temp_dir dir;
  auto run = [&](int off_policy, const char* out) {
    test::write_file(dir / "s.toml", small_scenario(R"("static-tp8")")
                                       + fmt::format("training_s = 2\noff_policy_steps = {}\n",
                                                     off_policy));
    auto r = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / out});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return nlohmann::json::parse(test::read_file(dir / (std::string{out} + "/report.json")));
  };
  auto serial = run(0, "serial"), one_step = run(1, "one-step");
  BOOST_CHECK_EQUAL(one_step["workload"]["off_policy_steps"], 1);
  for (auto* report : {&serial, &one_step}) {
    auto& p = (*report)["policies"]["static-tp8"];
    const bool overlapped = report == &one_step;
    auto& starts = p["step_start_s"];
    auto& makespans = p["step_makespans_s"];
    BOOST_REQUIRE_EQUAL(starts.size(), 4u);
    double start = 0, training_end = 0;
    for (size_t k = 0; k + 1 < starts.size(); ++k) {
      double m = makespans[k].get<double>();
      BOOST_REQUIRE_GT(m, 2.0); // the trainer is never the bottleneck here
      // Synchronous: the next step waits out the training; async: only until the router
      // hears the step is over (the engines report on their 1 s monitoring tick).
      double gap = starts[k + 1].get<double>() - starts[k].get<double>() - m;
      BOOST_TEST_MESSAGE((overlapped ? "async" : "sync") << " gap after step " << k << ": "
                                                           << gap << " s");
      if (overlapped) {
        BOOST_CHECK_GE(gap, -0.01);
        BOOST_CHECK_LE(gap, 1.01);
      } else {
        BOOST_CHECK_SMALL(gap - 2.0, 0.01);
      }
    }
    for (auto& m : makespans) {
      double training_start = std::max(start + m.get<double>(), training_end);
      training_end = training_start + 2;
      start = overlapped ? training_start : training_end;
    }
    BOOST_CHECK_CLOSE(p["rl_time_s"].get<double>(), training_end, 0.01);
    BOOST_CHECK_CLOSE(p["samples_per_s"].get<double>(), 4 * 192 / training_end, 0.1);
    BOOST_CHECK_CLOSE(p["mean_staleness_steps"].get<double>(), overlapped ? 0.75 : 0.0, 1e-6);
  }
  BOOST_CHECK_GT(one_step["policies"]["static-tp8"]["samples_per_s"].get<double>(),
                 serial["policies"]["static-tp8"]["samples_per_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(a_bad_scenario_is_refused_with_file_line_and_key) {
  test::temp_dir dir;
  test::write_file(dir / "bad.toml", small_scenario(R"("orchestr", "static-tp16")"));
  auto r = test::run({test::loom_binary(), "replay", dir / "bad.toml", "--out", dir / "o"});
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(r.err.find("bad.toml:5") != std::string::npos);
  BOOST_CHECK(r.err.find("scenario.policies") != std::string::npos);
  BOOST_CHECK(r.err.find("static-tp16") != std::string::npos);
  BOOST_CHECK(!std::filesystem::exists(dir / "o/report.json"));
}

BOOST_AUTO_TEST_CASE(seeds_give_one_report_each_and_their_spread) {
  test::temp_dir dir;
  auto text = small_scenario(R"("static-best", "static-tp8")");
  boost::replace_first(text, "seed = 3", "seeds = [3, 4, 5]");
  boost::replace_first(text, "steps = 4", "steps = 2");
  test::write_file(dir / "s.toml", text);
  auto a = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "a"});
  auto b = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "b"});
  BOOST_REQUIRE_EQUAL(a.exit_code, 0);
  BOOST_REQUIRE_EQUAL(b.exit_code, 0);
  BOOST_CHECK(test::read_file(dir / "a/report.json") == test::read_file(dir / "b/report.json"));
  auto report = nlohmann::json::parse(test::read_file(dir / "a/report.json"));
  BOOST_CHECK_EQUAL(report["seeds"].size(), 3u);
  auto& spread = report["across_seeds"]["policies"]["static-tp8"]["samples_per_s"];
  // Each seed draws its own batches: the seeds' own reports give the mean, min and max.
  std::vector<double> per_seed;
  for (int seed : {3, 4, 5}) {
    auto r = nlohmann::json::parse(test::read_file(dir / fmt::format("a/seed-{}/report.json",
                                                                       seed)));
    BOOST_CHECK_EQUAL(r["seed"], seed);
    per_seed.push_back(r["policies"]["static-tp8"]["samples_per_s"].get<double>());
  }
  BOOST_CHECK_NE(per_seed[0], per_seed[1]);
  BOOST_CHECK_CLOSE(spread["min"].get<double>(),
                    *std::min_element(per_seed.begin(), per_seed.end()), 0.01);
  BOOST_CHECK_CLOSE(spread["max"].get<double>(),
                    *std::max_element(per_seed.begin(), per_seed.end()), 0.01);
  BOOST_CHECK_CLOSE(spread["mean"].get<double>(), (per_seed[0] + per_seed[1] + per_seed[2]) / 3,
                    0.05);
  BOOST_CHECK(a.out.find("means over 3 seeds") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_profile_of_another_model_is_refused_at_its_key) {
  test::temp_dir dir;
  test::write_file(dir / "p.toml", R"([profile]
model = "Qwen2.5-72B"
gpu = "H800"

[[config]]
parallel = "TP8"
fixed_ms = 5
per_request_ms = 0.05
per_kilotoken_ms = 0.01
)");
  auto text = small_scenario(R"("static-best")");
  boost::replace_first(text, "gpus = 8", "gpus = 8\nprofile = \"p.toml\"");
  test::write_file(dir / "s.toml", text);
  auto r = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "o"});
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(r.err.find("s.toml:11") != std::string::npos);
  BOOST_CHECK(r.err.find("deployment.profile") != std::string::npos);
  BOOST_CHECK(r.err.find("Qwen2.5-72B") != std::string::npos);
  // Samples that cannot be fitted are refused in the profile file itself.
  test::write_file(dir / "p.toml", R"([profile]
model = "Qwen2.5-14B"
gpu = "H800"

[[config]]
parallel = "TP8"
batch = [8, 16]
context_tokens = [1000, 2000]
step_ms = [5, 6]
)");
  r = test::run({test::loom_binary(), "replay", dir / "s.toml", "--out", dir / "o"});
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(r.err.find("p.toml:9") != std::string::npos);
  BOOST_CHECK(r.err.find("config[0].step_ms") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(every_bundled_generation_scenario_loads) {
  for (auto name : {"gen-qwen14b-15k", "gen-qwen14b-25k", "gen-qwen14b-25k-async", "gen-azure-conv",
                    "gen-drive"}) {
    auto sc = replay::load_gen_scenario(test::source_path(fmt::format("replay/scenarios/{}.toml",
                                                                      name)));
    for (auto& e : sc.errors)
      BOOST_TEST_MESSAGE(e.to_string());
    BOOST_REQUIRE_MESSAGE(sc.value, name);
    BOOST_CHECK_GE(sc.value->policies.size(), 2u);
    BOOST_CHECK(!sc.value->steps.empty());
    for (auto& step : sc.value->steps)
      for (auto& s : step)
        BOOST_CHECK(s.output_tokens >= 1 && s.output_tokens <= sc.value->max_tokens);
  }
}

BOOST_AUTO_TEST_CASE(generated_lengths_are_heavy_tailed_and_drift) {
  replay::gen_length_generator g;
  g.steps = 10;
  g.batch = 2000;
  g.max_tokens = 25600;
  g.median_tokens = 2600;
  g.drift_per_step = 0.05;
  auto steps = replay::generate_gen_workload(g, 11);
  auto share_below = [](const std::vector<replay::gen_sample>& s, int64_t limit) {
    double n = 0;
    for (auto& x : s)
      n += x.output_tokens < limit ? 1 : 0;
    return n / double(s.size());
  };
  auto mean = [](const std::vector<replay::gen_sample>& s) {
    double sum = 0;
    for (auto& x : s)
      sum += double(x.output_tokens);
    return sum / double(s.size());
  };
  BOOST_CHECK_GT(share_below(steps[0], 7500), 0.8); // Fig. 3a: most under 7.5K
  BOOST_CHECK_LT(share_below(steps[0], 25600), 1.0); // ... and some reach the cap
  BOOST_CHECK_GT(mean(steps[9]), mean(steps[0]) * 1.3);
  BOOST_CHECK(replay::generate_gen_workload(g, 11)[3][7].output_tokens
              == steps[3][7].output_tokens);
}

BOOST_AUTO_TEST_CASE(prompt_groups_share_their_prompt_and_correlate_their_lengths) {
  replay::gen_length_generator g;
  g.steps = 1;
  g.batch = 16000;
  g.max_tokens = 1 << 24; // no cap: the log-lengths stay normal
  g.median_tokens = 2600;
  g.sigma = 0.9;
  g.drift_per_step = 0;
  // Groups of one are the generator as it was: the same seed gives the same batch.
  auto alone = replay::generate_gen_workload(g, 5)[0];
  g.group_correlation = 0.5;
  BOOST_CHECK(replay::generate_gen_workload(g, 5)[0][123].output_tokens
              == alone[123].output_tokens);
  g.group_size = 16;
  auto grouped = replay::generate_gen_workload(g, 5)[0];
  BOOST_REQUIRE_EQUAL(grouped.size(), 16000u);
  // Log-lengths: the variance stays sigma^2, the pairs inside a group covary by rho sigma^2.
  std::vector<double> x;
  for (auto& s : grouped)
    x.push_back(std::log(double(s.output_tokens)));
  double mean = 0;
  for (auto v : x)
    mean += v / double(x.size());
  double var = 0;
  double within = 0;
  size_t pairs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    var += (x[i] - mean) * (x[i] - mean) / double(x.size());
    if (i % 16 != 0) {
      within += (x[i] - mean) * (x[i - 1] - mean);
      ++pairs;
      BOOST_CHECK_EQUAL(grouped[i].prompt_tokens, grouped[i - 1].prompt_tokens);
    }
  }
  BOOST_CHECK_CLOSE(std::exp(mean), 2600.0, 5.0);
  BOOST_CHECK_CLOSE(std::sqrt(var), 0.9, 5.0);
  BOOST_CHECK_CLOSE(within / double(pairs) / var, 0.5, 15.0);
}

BOOST_AUTO_TEST_CASE(a_scenario_names_its_dispatch_and_bad_groups_at_their_keys) {
  test::temp_dir dir;
  const std::string head = "[scenario]\nname = \"g\"\nkind = \"generation\"\n"
                           "policies = [\"static-best\"]\n[deployment]\nmodel = \"Qwen2.5-14B\"\n"
                           "gpus = 8\n[workload]\nsteps = 1\nbatch = 32\nmax_tokens = 4096\n";
  test::write_file(dir / "ok.toml", head + "group_size = 8\ngroup_correlation = 0.4\n"
                                           "dispatch = \"contiguous\"\n");
  auto ok = replay::load_gen_scenario(dir / "ok.toml");
  BOOST_REQUIRE(ok.value);
  BOOST_CHECK(ok.value->dispatch == dispatch_mode::contiguous);
  BOOST_CHECK_EQUAL(ok.value->steps[0][0].prompt_tokens, ok.value->steps[0][7].prompt_tokens);
  test::write_file(dir / "bad.toml", head + "group_size = 0\ngroup_correlation = 1.5\n"
                                            "dispatch = \"sideways\"\n");
  auto bad = replay::load_gen_scenario(dir / "bad.toml");
  BOOST_REQUIRE(!bad.value);
  std::string all;
  for (auto& e : bad.errors)
    all += e.to_string() + "\n";
  for (auto where : {"bad.toml:12:14: workload.group_size", "bad.toml:13:21: workload.group_correlation",
                     "bad.toml:14:12: workload.dispatch"})
    BOOST_CHECK_MESSAGE(all.find(where) != std::string::npos, where << " not in:\n" << all);
}

BOOST_AUTO_TEST_CASE(azure_trace_rows_become_scaled_steps) {
  test::temp_dir dir;
  test::write_file(dir / "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                  "2023-11-16 18:15:46.6805900,374,44\n"
                                  "2023-11-16 18:15:50.9951690,396,109\r\n"
                                  "2023-11-16 18:15:51.2224670,879,1000\n");
  replay::gen_trace_options o{dir / "t.csv", 2, 2, 8000, 10.0, 1.0};
  std::vector<config_error> errors;
  auto steps = replay::load_gen_trace(o, errors);
  BOOST_REQUIRE(steps);
  BOOST_REQUIRE_EQUAL(steps->size(), 2u);
  BOOST_CHECK_EQUAL((*steps)[0][0].prompt_tokens, 374);
  BOOST_CHECK_EQUAL((*steps)[0][0].output_tokens, 440);
  BOOST_CHECK_EQUAL((*steps)[0][1].output_tokens, 1090);
  BOOST_CHECK_EQUAL((*steps)[1][0].output_tokens, 8000); // 10000 capped
  BOOST_CHECK_EQUAL((*steps)[1][1].prompt_tokens, 374);  // wraps around
  test::write_file(dir / "bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2023-11-16 18:15:46.6805900,374,44\n"
                                    "2023-11-16 18:15:50.9951690,x,109\n");
  o.path = dir / "bad.csv";
  BOOST_CHECK(!replay::load_gen_trace(o, errors));
  BOOST_REQUIRE_EQUAL(errors.size(), 1u);
  BOOST_CHECK_EQUAL(errors[0].line, 3);
}

BOOST_AUTO_TEST_SUITE_END()
