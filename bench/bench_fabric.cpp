// Greedy circuit allocation (App. D Alg. 3) with dense all-to-all demand, 64 OCS ports per
// endpoint: a 64-PoD core whose 512-port OCS devices give each PoD 64 ports, a PoD of 64 ToRs,
// and the scaling from 8 to 2,048 endpoints. Goal: under 5 ms at 64 endpoints.

#include <benchmark/benchmark.h>

#include <random>

#include "fabric/allocate.hpp"

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
  for (auto _ : state) {
    auto a = loom::allocate_circuits(ports, demands, 25e9);
    steps = a.steps;
    benchmark::DoNotOptimize(a);
  }
  state.counters["endpoints"] = n;
  state.counters["demands"] = static_cast<double>(demands.size());
  state.counters["circuits"] = static_cast<double>(steps);
}
BENCHMARK(BM_allocate_circuits)
  ->Arg(8)->Arg(64)->Arg(256)->Arg(1024)->Arg(2048)
  ->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
