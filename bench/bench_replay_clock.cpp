// Virtual-time throughput of the replay driver: how many delayed messages (timeouts) and
// ordinary messages per second of wall time, i.e. how fast a simulated week goes by. Then
// replay's own pace beside that floor: `loom replay` of gen-qwen14b-25k (its timings.json
// counts the events each policy's run drove) against the driver alone running timers and
// messages, events per wall second and the ratio, several rounds (#49).
//
//   bench_replay_clock                      the Google Benchmark cases, then 3 side-by-side rounds
//   bench_replay_clock --side-by-side N     N rounds only

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <caf/all.hpp>

#include "bench/support.hpp"
#include "replay/driver.hpp"
#include "tests/support/process.hpp"

namespace {

caf::behavior ticker(caf::event_based_actor* self, caf::actor sink, int ticks,
                     caf::timespan period) {
  self->delayed_send(self, period, caf::tick_atom::value, 0);
  return {
    [=](caf::tick_atom, int seq) {
      self->send(sink, caf::put_atom::value, seq);
      if (seq + 1 < ticks)
        self->delayed_send(self, period, caf::tick_atom::value, seq + 1);
      else
        self->quit();
    },
  };
}

/// `actors` tickers, each firing once per simulated minute for `days`, to quiescence.
loom::replay::run_stats simulate(int actors, int days) {
  const int ticks = days * 24 * 60;
  loom::replay::driver drv;
  auto sink = drv.system().spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](caf::put_atom, int) {}};
  });
  for (int a = 0; a < actors; ++a)
    drv.system().spawn(ticker, sink, ticks,
                       caf::timespan{std::chrono::minutes{1}} + caf::timespan{a});
  auto stats = drv.run_to_quiescence();
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  return stats;
}

void BM_simulated_week(benchmark::State& state) {
  const int actors = static_cast<int>(state.range(0));
  size_t timeouts = 0;
  size_t messages = 0;
  for (auto _ : state) {
    auto stats = simulate(actors, 7);
    timeouts += stats.timeouts;
    messages += stats.messages;
  }
  state.SetItemsProcessed(static_cast<int64_t>(timeouts));
  state.counters["messages"] = benchmark::Counter(static_cast<double>(messages),
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_simulated_week)->Arg(1)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

/// The floor: events (messages and timers) per wall second of the driver alone.
double driver_events_per_s() {
  auto t0 = loom::bench::clock_type::now();
  auto stats = simulate(16, 7);
  const double s = std::chrono::duration<double>(loom::bench::clock_type::now() - t0).count();
  return double(stats.messages + stats.timeouts) / s;
}

/// Replay's pace: every policy's events over every policy's wall time, means over the seeds;
/// 0 if the replay failed.
double replay_events_per_s(const std::string& scenario) {
  loom::test::temp_dir dir;
  auto r = loom::test::run({loom::bench::loom_binary(), "replay", scenario, "--out", dir / "out"},
                           std::chrono::seconds{600});
  if (r.exit_code != 0) {
    std::fprintf(stderr, "replay failed:\n%s\n", r.err.c_str());
    return 0;
  }
  auto t = nlohmann::json::parse(loom::test::read_file(dir / "out/timings.json"));
  double events = 0;
  double wall = 0;
  for (auto& [name, p] : t.items())
    if (p.contains("events") && p.contains("wall_s")) {
      events += p["events"].get<double>();
      wall += p["wall_s"].get<double>();
    }
  return wall > 0 ? events / wall : 0;
}

int side_by_side(int rounds) {
  const std::string scenario = LOOM_SOURCE_ROOT "/replay/scenarios/gen-qwen14b-25k.toml";
  std::vector<double> ratios;
  for (int i = 0; i < rounds; ++i) {
    const double floor = driver_events_per_s();
    const double replay = replay_events_per_s(scenario);
    if (replay <= 0)
      return 1;
    ratios.push_back(floor / replay);
    std::printf("round %d: driver alone %.0f events/s, replay of gen-qwen14b-25k %.0f events/s, "
                "%.1fx under the floor\n",
                i + 1, floor, replay, floor / replay);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("replay gen-qwen14b-25k vs the driver's event rate: min %.1fx, median %.1fx, "
              "max %.1fx under it\n",
              ratios.front(), ratios[ratios.size() / 2], ratios.back());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--side-by-side") == 0)
    return side_by_side(std::max(1, std::atoi(argv[2])));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return side_by_side(3);
}
