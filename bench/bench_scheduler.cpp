// Inter-group scheduling decision latency vs. jobs already in the cluster (WEAVE Table 5:
// 5.6 ms at 5 jobs ... 591 ms at 2,000; Loom's goal: under 1 ms at 2,000 on one core).

#include <benchmark/benchmark.h>

#include <random>

#include "scheduler/placement.hpp"

namespace {

loom::rl_job random_job(std::mt19937_64& rng, int i) {
  std::uniform_real_distribution<double> roll{100, 600};
  std::uniform_real_distribution<double> train{50, 300};
  std::uniform_real_distribution<double> slo{1.0, 2.0};
  std::uniform_real_distribution<double> mem{100, 400};
  return loom::rl_job{"job-" + std::to_string(i), 8, 8, mem(rng), mem(rng), slo(rng), roll(rng),
                      train(rng), 0};
}

/// range(1): the admission bound (0 worst_case_schedule, 1 any_realization).
void BM_place_job(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const auto bound = state.range(1) ? loom::slo_bound::any_realization
                                    : loom::slo_bound::worst_case_schedule;
  std::vector<loom::pool_node> roll;
  std::vector<loom::pool_node> train;
  for (int i = 0; i < 4096; ++i) {
    roll.push_back({"r" + std::to_string(i), 8, 2048, 8 * 1.85});
    train.push_back({"t" + std::to_string(i), 8, 2048, 8 * 5.28});
  }
  loom::placement_engine engine{roll, train, 4, 0.0, bound};
  std::mt19937_64 rng{42};
  for (int i = 0; i < jobs; ++i) {
    auto j = random_job(rng, i);
    engine.commit(j, engine.place(j));
  }
  auto arriving = random_job(rng, jobs);
  for (auto _ : state)
    benchmark::DoNotOptimize(engine.place(arriving));
  state.counters["groups"] = static_cast<double>(engine.groups().size());
}
BENCHMARK(BM_place_job)
  ->ArgsProduct({{5, 100, 500, 1000, 2000}, {0, 1}})
  ->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
