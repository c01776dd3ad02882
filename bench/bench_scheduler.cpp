// Inter-group scheduling decision latency vs. jobs already in the cluster (WEAVE Table 5:
// 5.6 ms at 5 jobs ... 591 ms at 2,000; Loom's goal: under 1 ms at 2,000 on one core), and the
// consolidation check a departure adds.

#include <benchmark/benchmark.h>

#include <random>

#include "scheduler/consolidation.hpp"
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

/// A cluster of 4,096 + 4,096 nodes holding `jobs` placed by Algorithm 1.
loom::placement_engine loaded_engine(int jobs, loom::slo_bound bound, std::mt19937_64& rng) {
  std::vector<loom::pool_node> roll;
  std::vector<loom::pool_node> train;
  for (int i = 0; i < 4096; ++i) {
    roll.push_back({"r" + std::to_string(i), 8, 2048, 8 * 1.85});
    train.push_back({"t" + std::to_string(i), 8, 2048, 8 * 5.28});
  }
  loom::weave_policy policy;
  policy.admission_bound = bound;
  loom::placement_engine engine{roll, train, policy};
  for (int i = 0; i < jobs; ++i) {
    auto j = random_job(rng, i);
    engine.commit(j, engine.place(j));
  }
  return engine;
}

/// range(1): the admission bound (0 worst_case_schedule, 1 any_realization).
void BM_place_job(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const auto bound = state.range(1) ? loom::slo_bound::any_realization
                                    : loom::slo_bound::worst_case_schedule;
  std::mt19937_64 rng{42};
  auto engine = loaded_engine(jobs, bound, rng);
  auto arriving = random_job(rng, jobs);
  for (auto _ : state)
    benchmark::DoNotOptimize(engine.place(arriving));
  state.counters["groups"] = static_cast<double>(engine.groups().size());
}
BENCHMARK(BM_place_job)
  ->ArgsProduct({{5, 100, 500, 1000, 2000}, {0, 1}})
  ->Unit(benchmark::kMicrosecond);

/// The consolidation check a departure makes: the group it left, its members placed again on
/// a copy of the engine (the fullest group, so that the most members are tried).
void BM_consolidation_check(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  std::mt19937_64 rng{42};
  auto engine = loaded_engine(jobs, loom::slo_bound::worst_case_schedule, rng);
  uint64_t fullest = 0;
  size_t most = 0;
  for (auto& [id, g] : engine.groups())
    if (g.members.size() > most) {
      most = g.members.size();
      fullest = id;
    }
  engine.remove(engine.groups().at(fullest).members.front().job.id); // the departure
  std::map<std::string, loom::member_outlook> outlook;
  for (auto& m : engine.groups().at(fullest).members)
    outlook[m.job.id] = {36000, 300};
  for (auto _ : state)
    benchmark::DoNotOptimize(loom::plan_regrouping(engine, fullest, outlook));
  state.counters["members"] = static_cast<double>(outlook.size());
}
BENCHMARK(BM_consolidation_check)->Arg(100)->Arg(1000)->Arg(2000)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
