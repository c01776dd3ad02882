// The fabric controller's cores at scale.
// - Greedy circuit allocation (App. D Alg. 3) with dense all-to-all demand, 64 OCS ports per
//   endpoint, from 8 to 2,048 endpoints. Goals: under 5 ms at 64 endpoints; at 2,048 at least
//   4x faster than the sorted-pass version (546 ms here), with identical output; and within
//   6x of its floor, one pass over the same demands (each endpoint's bytes summed), timed
//   beside it in every iteration (counter `floor_ratio`).
// - A whole materialisation (allocation, concrete ports, validation) for a 64-PoD OCS-Core
//   of eight 512-port devices under dense PoD demand, and for one PoD of 64 ToRs under a
//   dense all-to-all. Goal: under 5 ms each.
// - The flow model timing a 128-rank MoE all-to-all (Fig. 23's EP64_DP2, both allocations:
//   about 4,500 max-min solves over 19,000 flows). Goal: at least 3x faster than rebuilding
//   the solution and copying every flow at each completion (1.9-2.1 s here), same times.
// - One Opus training step.

#include <benchmark/benchmark.h>

#include <chrono>
#include <random>

#include "fabric/allocate.hpp"
#include "fabric/circuit_plan.hpp"
#include "fabric/demand.hpp"
#include "fabric/shape.hpp"
#include "replay/fabric_collectives.hpp"
#include "replay/opus_step.hpp"

namespace {

void BM_allocate_circuits(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  std::mt19937_64 rng{3};
  std::uniform_real_distribution<double> bytes{1e8, 1e10};
  std::vector<loom::demand> demands;
  for (uint32_t u = 0; u < n; ++u)
    for (uint32_t v = 0; v < n; ++v)
      if (u != v)
        demands.push_back({u, v, bytes(rng)});
  std::vector<uint32_t> ports(n, 64);
  uint64_t steps = 0;
  double allocating_s = 0;
  double floor_s = 0;
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point from) {
    return std::chrono::duration<double>(clock::now() - from).count();
  };
  for (auto _ : state) {
    auto t0 = clock::now();
    double total = 0;
    for (auto& d : demands)
      total += d.bytes;
    benchmark::DoNotOptimize(total);
    floor_s += seconds(t0);
    t0 = clock::now();
    auto a = loom::allocate_circuits(ports, demands, 25e9);
    allocating_s += seconds(t0);
    steps = a.steps;
    benchmark::DoNotOptimize(a);
  }
  state.counters["floor_ratio"] = allocating_s / floor_s;
  state.counters["endpoints"] = n;
  state.counters["demands"] = static_cast<double>(demands.size());
  state.counters["circuits"] = static_cast<double>(steps);
}
BENCHMARK(BM_allocate_circuits)
  ->Arg(8)->Arg(64)->Arg(256)->Arg(1024)->Arg(2048)
  ->Unit(benchmark::kMillisecond);

/// A shaped fabric, its dense demand between every pair of `ranks`, and a template for it.
struct dense_fabric {
  loom::fabric_model model;
  loom::aggregated_demand demand;
  loom::stage_template tpl;

  dense_fabric(const loom::rfabric_shape& shape, const std::vector<loom::rank_ref>& ranks) {
    auto f = loom::make_rfabric(shape);
    model = *loom::fabric_model::build(f.config, f.nodes).value;
    std::mt19937_64 rng{5};
    std::uniform_real_distribution<double> bytes{1e8, 1e10};
    std::vector<loom::rank_flow> flows;
    for (auto& a : ranks)
      for (auto& b : ranks)
        if (!(a == b))
          flows.push_back({a, b, bytes(rng)});
    demand = loom::aggregate_demand(model, flows);
    loom::fabric_intent intent{"bench", loom::fabric_stage::train_grad_sync,
                               {{loom::primitive::all_reduce, 1}}, ranks, 1e9};
    tpl = loom::select_template(model, intent);
  }
};

void run_materialize(benchmark::State& state, const dense_fabric& f) {
  loom::port_usage usage(f.model);
  size_t circuits = 0;
  for (auto _ : state) {
    auto r = loom::materialize_plan(f.model, f.tpl, f.demand, usage, "bench");
    if (!r.plan) {
      state.SkipWithError(r.rejection.c_str());
      return;
    }
    circuits = r.plan->circuits.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["circuits"] = double(circuits);
}

void BM_materialize_core_64_pods(benchmark::State& state) {
  // 64 PoDs of one 8-server rack, 64 boundary ports each over eight 512-port core devices;
  // one rank per PoD talks to every other PoD.
  loom::rfabric_shape s;
  s.pods = 64;
  s.servers_per_rack = 8;
  s.tor_uplinks = 8;
  s.boundary_ports = 64;
  s.core_devices = 8;
  std::vector<loom::rank_ref> ranks;
  for (uint32_t p = 0; p < 64; ++p)
    for (int g = 0; g < 8; ++g)
      ranks.push_back({p * 8, g});
  static const dense_fabric f{s, ranks};
  run_materialize(state, f);
}
BENCHMARK(BM_materialize_core_64_pods)->Unit(benchmark::kMillisecond);

void BM_materialize_pod_64_tors(benchmark::State& state) {
  // One PoD: 8 racks x 8 rails = 64 ToRs with 8 uplinks; one rank per ToR, all-to-all.
  loom::rfabric_shape s;
  s.racks_per_pod = 8;
  s.servers_per_rack = 8;
  s.tor_uplinks = 8;
  std::vector<loom::rank_ref> ranks;
  for (uint32_t r = 0; r < 8; ++r)
    for (int g = 0; g < 8; ++g)
      ranks.push_back({r * 8, g});
  static const dense_fabric f{s, ranks};
  run_materialize(state, f);
}
BENCHMARK(BM_materialize_pod_64_tors)->Unit(benchmark::kMillisecond);

void BM_flow_model_moe_all_to_all(benchmark::State& state) {
  // Fig. 23's EP64_DP2: 128 ranks, skewed expert load, both allocations timed.
  loom::rfabric_shape s;
  s.racks_per_pod = 4;
  s.servers_per_rack = 4;
  s.tor_uplinks = 4;
  loom::replay::collective_setup c;
  c.name = "EP64_DP2";
  c.layout = *loom::replay::parse_parallel_layout("EP64_DP2");
  c.domain = "EP";
  c.expert_skew = 0.5;
  for (auto _ : state)
    benchmark::DoNotOptimize(loom::replay::evaluate_collective(s, c, 23));
}
BENCHMARK(BM_flow_model_moe_all_to_all)->Unit(benchmark::kMillisecond);

void BM_opus_training_step(benchmark::State& state) {
  loom::replay::opus_workload w;
  w.model = *loom::replay::find_opus_model("Llama-3-8B");
  w.fsdp = 8;
  w.global_batch = 64;
  for (auto _ : state)
    benchmark::DoNotOptimize(
      loom::replay::simulate_opus(w, {}, loom::replay::opus_mode::provisioning));
}
BENCHMARK(BM_opus_training_step)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
