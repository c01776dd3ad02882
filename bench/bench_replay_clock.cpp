// Virtual-time throughput of the replay driver: how many delayed messages (timeouts) and
// ordinary messages per second of wall time, i.e. how fast a simulated week goes by.

#include <benchmark/benchmark.h>

#include <caf/all.hpp>

#include "replay/driver.hpp"

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

void BM_simulated_week(benchmark::State& state) {
  // `actors` tickers, each firing once per simulated minute for seven days.
  const int actors = static_cast<int>(state.range(0));
  const int ticks = 7 * 24 * 60;
  size_t timeouts = 0;
  size_t messages = 0;
  for (auto _ : state) {
    loom::replay::driver drv;
    auto sink = drv.system().spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](caf::put_atom, int) {}};
    });
    for (int a = 0; a < actors; ++a)
      drv.system().spawn(ticker, sink, ticks,
                         caf::timespan{std::chrono::minutes{1}} + caf::timespan{a});
    auto stats = drv.run_to_quiescence();
    timeouts += stats.timeouts;
    messages += stats.messages;
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  state.SetItemsProcessed(static_cast<int64_t>(timeouts));
  state.counters["messages"] = benchmark::Counter(static_cast<double>(messages),
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_simulated_week)->Arg(1)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
