// Generation cores: one balancer tick over N instances (OrchestrRL §4.2; goal under 1 ms for
// 1,000 instances), the instance simulator the planner calls per candidate config, the planner
// solve, and the live runtime's monitoring tick (every instance's stats in, the balancer's
// loads out, migrations turned into commands) at 128-1,024 GPUs.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "generation/batch_sim.hpp"
#include "generation/config_search.hpp"
#include "generation/deployment_runtime.hpp"
#include "generation/load_index.hpp"
#include "types/gpu.hpp"

namespace {

std::vector<loom::gen_worker> skewed_deployment(int instances, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_int_distribution<int> running{8, 64};
  std::uniform_int_distribution<int> waiting{0, 32};
  std::uniform_int_distribution<int64_t> context{200, 12000};
  std::uniform_real_distribution<double> rate{800, 1600};
  std::vector<loom::gen_worker> ws;
  uint64_t next = 0;
  for (int i = 0; i < instances; ++i) {
    loom::gen_worker w;
    w.id = static_cast<uint32_t>(i);
    for (int k = running(rng); k > 0; --k)
      w.running.push_back({next++, context(rng)});
    for (int k = waiting(rng); k > 0; --k)
      w.waiting.push_back({next++, context(rng)});
    w.kv_free_tokens = context(rng) * 8;
    w.decode_rate_tps = rate(rng);
    ws.push_back(std::move(w));
  }
  return ws;
}

void BM_balancer_tick(benchmark::State& state) {
  auto base = skewed_deployment(static_cast<int>(state.range(0)), 1);
  size_t moves = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto ws = base;
    state.ResumeTiming();
    moves = loom::plan_migrations(ws, {}).size();
    benchmark::DoNotOptimize(ws);
  }
  state.counters["migrations"] = static_cast<double>(moves);
}
BENCHMARK(BM_balancer_tick)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_simulate_instance(benchmark::State& state) {
  loom::engine_model e{*loom::find_model("Qwen2.5-14B"), *loom::find_builtin_gpu("H800")};
  std::mt19937_64 rng{7};
  std::lognormal_distribution<double> len{std::log(2500.0), 0.8};
  std::vector<loom::sim_request> reqs;
  for (int i = 0; i < state.range(0); ++i)
    reqs.push_back({400, std::min<int64_t>(15000, static_cast<int64_t>(len(rng))), false});
  for (auto _ : state)
    benchmark::DoNotOptimize(loom::simulate_instance(e, 8, reqs));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_simulate_instance)->Arg(128)->Arg(512)->Unit(benchmark::kMicrosecond);

/// `per_gpu` pending requests per GPU on `current` (16: mid-step, OrchestrRL App. F's
/// setting), planned with every candidate the model has.
void plan_bench(benchmark::State& state, const loom::engine_model& e, int gpus,
                const loom::gen_deployment& current, int per_gpu = 16) {
  std::mt19937_64 rng{5};
  std::lognormal_distribution<double> len{std::log(2500.0), 0.8};
  std::uniform_int_distribution<int64_t> done{0, 1500};
  std::vector<loom::gen_request_state> pending;
  for (int i = 0; i < per_gpu * gpus; ++i) {
    auto total = std::min<int64_t>(15000, static_cast<int64_t>(len(rng)));
    auto generated = std::min(total - 1, done(rng));
    pending.push_back({static_cast<uint64_t>(i), 400 + generated, total - generated,
                       i % current.instances});
  }
  loom::planner_params params;
  params.afd_configs = loom::profile_afd_configs(e, params.gpus_per_node); // as gen_planner does
  size_t evaluated = 0;
  size_t pruned = 0;
  for (auto _ : state) {
    auto plan = loom::plan_generation(e, gpus, current, pending, params);
    evaluated = plan.evaluated.size();
    pruned = size_t(std::count_if(plan.evaluated.begin(), plan.evaluated.end(),
                                  [](auto& c) { return c.pruned; }));
    benchmark::DoNotOptimize(plan);
  }
  state.counters["requests"] = static_cast<double>(pending.size());
  state.counters["candidates"] = static_cast<double>(evaluated);
  state.counters["pruned"] = static_cast<double>(pruned);
}

/// Qwen2.5-14B mid-step on 4-way TP.
void BM_plan_generation(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  plan_bench(state, {*loom::find_model("Qwen2.5-14B"), *loom::find_builtin_gpu("H800")}, gpus,
             {4, gpus / 4});
}
BENCHMARK(BM_plan_generation)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

/// Qwen2.5-14B in the tail on 2-way TP, 2 requests per GPU: the candidates add the mixed
/// deployments (TP instances plus one or two latency instances).
void BM_plan_generation_tail(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  plan_bench(state, {*loom::find_model("Qwen2.5-14B"), *loom::find_builtin_gpu("H800")}, gpus,
             {2, gpus / 2}, 2);
}
BENCHMARK(BM_plan_generation_tail)->Arg(16)->Arg(1024)->Unit(benchmark::kMillisecond);

/// A step's start on Qwen2.5-14B, 64 requests per GPU nothing has run yet, from the tail's
/// 2 x TP8: every start is scored with its best later tail switch (no candidate pruned).
void BM_plan_generation_new_batch(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const loom::engine_model e{*loom::find_model("Qwen2.5-14B"), *loom::find_builtin_gpu("H800")};
  std::mt19937_64 rng{5};
  std::lognormal_distribution<double> len{std::log(2500.0), 0.8};
  std::vector<loom::gen_request_state> batch;
  for (int i = 0; i < 64 * gpus; ++i) {
    auto total = std::min<int64_t>(25600, static_cast<int64_t>(len(rng)));
    batch.push_back({static_cast<uint64_t>(i), 400, total, -1, total});
  }
  loom::planner_params params;
  params.afd_configs = loom::profile_afd_configs(e, params.gpus_per_node);
  for (auto _ : state)
    benchmark::DoNotOptimize(loom::plan_generation(e, gpus, {8, gpus / 8}, batch, params));
  state.counters["requests"] = static_cast<double>(batch.size());
}
BENCHMARK(BM_plan_generation_new_batch)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

/// The target case: Qwen2-57B-A14B (MoE) mid-step on EP8 instances; its candidates add
/// EP over one or two nodes and the profiled AFD splits.
void BM_plan_generation_moe(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  plan_bench(state, {*loom::find_model("Qwen2-57B-A14B"), *loom::find_builtin_gpu("H800")}, gpus,
             {loom::parallel_config::expert_parallel(8, 1), gpus / 8});
}
BENCHMARK(BM_plan_generation_moe)->Arg(1024)->Unit(benchmark::kMillisecond);

} // namespace

/// A deployment of `gpus` GPUs in TP=1 instances on 8-GPU engines, its step of 16 requests per
/// GPU placed round-robin: the per-tick work of the controller.
void BM_runtime_tick(benchmark::State& state) {
  loom::engine_model e{*loom::find_model("Qwen2.5-14B"), *loom::find_builtin_gpu("H800")};
  const int gpus = int(state.range(0));
  loom::deployment_config d;
  d.name = "bench";
  d.gpus = gpus;
  d.initial = loom::parallel_config{1};
  d.planner_enabled = false;
  loom::deployment_runtime rt{e, d};
  for (int i = 0; i < gpus / 8; ++i)
    rt.join({"e" + std::to_string(i), "n", 8, false}, 0);
  for (auto& c : rt.take_commands())
    rt.on_ack({c.id, c.engine, true, {}, {}, 0}, 0);
  loom::step_batch b;
  for (int i = 0; i < gpus * 16; ++i)
    b.requests.push_back({uint64_t(i), 400, 0, -1});
  rt.start_step(b, 0);
  rt.plan_now(0);
  std::vector<loom::instance_stats> stats;
  for (auto& c : rt.take_commands()) {
    rt.on_ack({c.id, c.engine, true, {}, {}, 0}, 0);
    loom::instance_stats s{c.engine, c.instance, 1, {}, 100000, 200000, 256, 30.0, 0};
    for (auto& r : c.requests)
      s.requests.push_back({r.id, 400, int64_t(r.id % 3000), r.id % 4 != 0, r.id % 4 != 0});
    stats.push_back(std::move(s));
  }
  double now = 1;
  size_t moves = 0;
  for (auto _ : state) {
    for (auto& s : stats)
      rt.on_stats(s, now);
    auto work = rt.tick(now);
    if (work.balance) {
      auto loads = std::move(*work.balance);
      auto migrations = loom::plan_migrations(loads, {});
      moves = migrations.size();
      rt.on_migrations(migrations, now);
      for (auto& c : rt.take_commands()) // released, then admitted: both answered
        rt.on_ack({c.id, c.engine, true, {}, {}, 0}, now);
      rt.take_commands();
    }
    rt.take_records();
    now += 1;
  }
  state.counters["instances"] = double(gpus);
  state.counters["requests"] = double(gpus * 16);
  state.counters["migrations"] = double(moves);
}
BENCHMARK(BM_runtime_tick)->Arg(128)->Arg(1024)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
