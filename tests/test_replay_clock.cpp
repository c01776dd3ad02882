#define BOOST_TEST_MODULE replay_clock
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>
#include <random>
#include <tuple>
#include <vector>

#include "replay/driver.hpp"

using namespace std::chrono_literals;

namespace {

// (virtual ns since the collector started, ticker id, tick number)
using trace = std::vector<std::tuple<int64_t, int, int>>;

/// Delay before tick n+1 of a ticker: drawn from the ticker's own seeded generator.
caf::timespan next_delay(std::mt19937_64& rng, caf::timespan max_delay) {
  return caf::timespan{1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_delay.count()))};
}

/// Records, with its actor-clock time, every tick it is told about.
caf::behavior collector(caf::event_based_actor* self, trace* out) {
  auto origin = self->clock().now();
  return {
    [=](caf::put_atom, int id, int seq) {
      out->emplace_back((self->clock().now() - origin).count(), id, seq);
    },
  };
}

/// Ticks `count` times, each after a random delay, reporting every tick to the collector.
caf::behavior ticker(caf::event_based_actor* self, int id, uint64_t seed, caf::actor sink,
                     int count, caf::timespan max_delay) {
  auto rng = std::make_shared<std::mt19937_64>(seed * 1000 + static_cast<uint64_t>(id));
  self->delayed_send(self, next_delay(*rng, max_delay), caf::tick_atom::value, 0);
  return {
    [=](caf::tick_atom, int seq) {
      self->send(sink, caf::put_atom::value, id, seq);
      if (seq + 1 < count)
        self->delayed_send(self, next_delay(*rng, max_delay), caf::tick_atom::value, seq + 1);
      else
        self->quit();
    },
  };
}

struct scenario {
  int tickers = 5;
  int ticks = 200;
  caf::timespan max_delay = caf::timespan{std::chrono::minutes{10}};
};

trace run_scenario(uint64_t seed, const scenario& s, loom::replay::run_stats* stats = nullptr) {
  trace out;
  loom::replay::driver drv;
  auto sink = drv.system().spawn(collector, &out);
  for (int i = 0; i < s.tickers; ++i)
    drv.system().spawn(ticker, i, seed, sink, s.ticks, s.max_delay);
  auto st = drv.run_to_quiescence();
  if (stats)
    *stats = st;
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(same_seed_gives_same_events_and_timestamps) {
  scenario s;
  loom::replay::run_stats stats;
  auto a = run_scenario(42, s, &stats);
  auto b = run_scenario(42, s);
  BOOST_REQUIRE_EQUAL(a.size(), static_cast<size_t>(s.tickers * s.ticks));
  BOOST_CHECK(a == b);
  BOOST_CHECK(stats.quiescent);
  BOOST_CHECK_EQUAL(stats.timeouts, static_cast<size_t>(s.tickers * s.ticks));
  for (size_t i = 1; i < a.size(); ++i)
    BOOST_REQUIRE_LE(std::get<0>(a[i - 1]), std::get<0>(a[i]));
}

BOOST_AUTO_TEST_CASE(another_seed_gives_another_trace) {
  scenario s;
  BOOST_CHECK(run_scenario(42, s) != run_scenario(43, s));
}

BOOST_AUTO_TEST_CASE(timestamps_are_exactly_the_scheduled_delays) {
  scenario s;
  s.tickers = 3;
  s.ticks = 50;
  auto t = run_scenario(7, s);
  for (int id = 0; id < s.tickers; ++id) {
    std::mt19937_64 rng{7 * 1000 + static_cast<uint64_t>(id)};
    int64_t expected = 0;
    int seq = 0;
    for (auto& [time, who, n] : t) {
      if (who != id)
        continue;
      expected += next_delay(rng, s.max_delay).count();
      BOOST_REQUIRE_EQUAL(n, seq++);
      BOOST_REQUIRE_EQUAL(time, expected);
    }
    BOOST_CHECK_EQUAL(seq, s.ticks);
  }
}

BOOST_AUTO_TEST_CASE(horizon_stops_the_clock_exactly_and_resumes) {
  scenario s;
  s.tickers = 2;
  s.ticks = 1000; // about 2 x 1000 x 5 min: far beyond one hour
  trace out;
  loom::replay::driver drv;
  auto sink = drv.system().spawn(collector, &out);
  for (int i = 0; i < s.tickers; ++i)
    drv.system().spawn(ticker, i, 1, sink, s.ticks, s.max_delay);
  auto first = drv.run_until(1h);
  BOOST_CHECK(!first.quiescent);
  BOOST_CHECK(first.elapsed == caf::timespan{1h});
  BOOST_REQUIRE(!out.empty());
  BOOST_CHECK_LT(out.size(), static_cast<size_t>(s.tickers * s.ticks));
  for (auto& e : out)
    BOOST_CHECK_LE(std::get<0>(e), caf::timespan{1h}.count());
  auto rest = drv.run_to_quiescence();
  BOOST_CHECK(rest.quiescent);
  BOOST_CHECK_EQUAL(out.size(), static_cast<size_t>(s.tickers * s.ticks));
  BOOST_CHECK(out == run_scenario(1, s));
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_simulated_week) {
  // One tick per simulated minute for seven days.
  trace out;
  loom::replay::driver drv;
  auto sink = drv.system().spawn(collector, &out);
  constexpr int minutes_per_week = 7 * 24 * 60;
  drv.system().spawn(
    [](caf::event_based_actor* self, caf::actor sink) -> caf::behavior {
      self->delayed_send(self, std::chrono::minutes{1}, caf::tick_atom::value, 0);
      return {
        [=](caf::tick_atom, int seq) {
          self->send(sink, caf::put_atom::value, 0, seq);
          if (seq + 1 < minutes_per_week)
            self->delayed_send(self, std::chrono::minutes{1}, caf::tick_atom::value, seq + 1);
          else
            self->quit();
        },
      };
    },
    sink);
  auto stats = drv.run_until(caf::timespan{std::chrono::hours{24 * 8}});
  BOOST_CHECK(stats.quiescent);
  BOOST_REQUIRE_EQUAL(out.size(), static_cast<size_t>(minutes_per_week));
  BOOST_CHECK_EQUAL(std::get<0>(out.back()), caf::timespan{std::chrono::hours{24 * 7}}.count());
  BOOST_CHECK(drv.elapsed() == caf::timespan{std::chrono::hours{24 * 7}});
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}
