#define BOOST_TEST_MODULE generation
#include <boost/test/unit_test.hpp>

#include "generation/histogram.hpp"
#include "generation/load_index.hpp"

using namespace loom;

BOOST_AUTO_TEST_SUITE(histogram)

BOOST_AUTO_TEST_CASE(bins_and_upper_bounds) {
  remaining_histogram h{256, 1000};
  BOOST_CHECK_EQUAL(h.bins(), 4u);
  BOOST_CHECK_EQUAL(h.bin_of(1), 0u);
  BOOST_CHECK_EQUAL(h.bin_of(256), 0u);
  BOOST_CHECK_EQUAL(h.bin_of(257), 1u);
  BOOST_CHECK_EQUAL(h.upper_bound(3), 1000); // the last bin ends at the max length
  BOOST_CHECK_EQUAL(h.bin_of(5000), 3u);
}

BOOST_AUTO_TEST_CASE(finishing_and_progress_update_the_counts) {
  remaining_histogram h{256, 1024};
  h.assign({4, 3, 2, 1});
  h.on_finished(100); // bin 0
  BOOST_CHECK_EQUAL(h.count(0), 3.0);
  h.on_finished(300); // bin 1
  h.assign({0, 1, 2, 1});
  h.on_finished(10); // bin 0 is empty: the forecast was too long, bin 1 gives it up
  BOOST_CHECK_EQUAL(h.count(1), 0.0);
  BOOST_CHECK_EQUAL(h.pending(), 3.0);
  h.assign({4, 3, 2, 1});
  h.on_progress(600); // every pending request is past 600 tokens: bins 0 and 1 are impossible
  BOOST_CHECK_EQUAL(h.count(0), 0.0);
  BOOST_CHECK_EQUAL(h.count(1), 0.0);
  BOOST_CHECK_EQUAL(h.count(2), 9.0);
  BOOST_CHECK_EQUAL(h.pending(), 10.0);
}

BOOST_AUTO_TEST_CASE(remaining_estimate_matches_ranks_conservatively) {
  remaining_histogram h{256, 1024};
  h.assign({1, 1, 0, 1}); // one request each ending by 256, 512 and 1024 tokens
  // Progress 100, 700, 300: the furthest along gets the longest bin.
  auto r = h.estimate_remaining({100, 700, 300});
  BOOST_CHECK_EQUAL(r[1], 1024 - 700);
  BOOST_CHECK_EQUAL(r[2], 512 - 300);
  BOOST_CHECK_EQUAL(r[0], 256 - 100);
  // A request already past its matched bin still has at least one token to go.
  auto past = h.estimate_remaining({900, 600, 400});
  BOOST_CHECK_EQUAL(past[1], 1); // matched to 512 but at 600
  BOOST_CHECK_GE(past[2], 1);
}

BOOST_AUTO_TEST_CASE(expected_remaining_is_the_mean_beyond_the_progress) {
  remaining_histogram h{256, 1024};
  h.assign({2, 1, 0, 1}); // ending by 256 (two), 512 and 1024 tokens
  auto e = h.expected_remaining({0, 0, 300, 600});
  // Not started: the mean of all four conservative lengths, alike for both.
  BOOST_CHECK_EQUAL(e[0], (256 + 256 + 512 + 1024) / 4);
  BOOST_CHECK_EQUAL(e[1], e[0]);
  BOOST_CHECK_EQUAL(e[2], (512 + 1024) / 2 - 300); // past the first bin
  BOOST_CHECK_EQUAL(e[3], 1024 - 600);             // only the longest is still possible
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(balancer)

namespace {

gen_worker worker(uint32_t id, int running, int waiting, int64_t free, double rate,
                  uint64_t first_request, int64_t context = 1000) {
  gen_worker w;
  w.id = id;
  for (int i = 0; i < running; ++i)
    w.running.push_back({first_request + uint64_t(i), context});
  for (int i = 0; i < waiting; ++i)
    w.waiting.push_back({first_request + 100 + uint64_t(i), context / 2 + 10 * i});
  w.kv_free_tokens = free;
  w.decode_rate_tps = w.pace_tps = rate; // a steady pace: no spread
  return w;
}

} // namespace

BOOST_AUTO_TEST_CASE(load_index_follows_equation_5) {
  auto w = worker(1, 4, 2, 4000, 1000, 0); // B_cap = 4 + 4000 / 1000 = 8
  BOOST_CHECK_CLOSE(kv_limited_concurrency(w), 8.0, 1e-9);
  BOOST_CHECK_CLOSE(load_index(w, 1000), 6.0 / 8.0, 1e-9);
  BOOST_CHECK_CLOSE(load_index(w, 2000), 6.0 / 8.0 * 2.0, 1e-9); // half the mean rate
  BOOST_CHECK_EQUAL(load_index(worker(2, 0, 0, 9000, 1000, 0), 1000), 0.0);
}

BOOST_AUTO_TEST_CASE(moves_waiting_short_context_first_until_within_theta) {
  std::vector<gen_worker> ws{worker(1, 4, 6, 0, 1000, 0), worker(2, 1, 0, 20000, 1000, 1000)};
  balancer_params p;
  p.theta = 0.25;
  auto moves = plan_migrations(ws, p);
  BOOST_REQUIRE(!moves.empty());
  BOOST_CHECK(moves.front().was_waiting);
  BOOST_CHECK_EQUAL(moves.front().request, 100u); // the shortest waiting context (500)
  BOOST_CHECK_EQUAL(moves.front().from, 1u);
  BOOST_CHECK_EQUAL(moves.front().to, 2u);
  double mean = 1000;
  BOOST_CHECK_LE(std::abs(load_index(ws[0], mean) - load_index(ws[1], mean)), p.theta);
}

BOOST_AUTO_TEST_CASE(never_breaks_the_destination_batch) {
  // The idle-looking destination has 1,500 tokens free and 4 running requests: with a reserve
  // of 256 per running request, nothing above 476 tokens may move there.
  std::vector<gen_worker> ws{worker(1, 8, 4, 0, 1000, 0, 2000), worker(2, 4, 0, 1500, 1000, 1000)};
  auto moves = plan_migrations(ws, {});
  BOOST_CHECK(moves.empty());
  BOOST_CHECK_EQUAL(ws[0].waiting.size(), 4u);
}

BOOST_AUTO_TEST_CASE(balanced_workers_are_left_alone) {
  std::vector<gen_worker> ws{worker(1, 4, 1, 4000, 1000, 0), worker(2, 4, 1, 4000, 1000, 100)};
  BOOST_CHECK(plan_migrations(ws, {}).empty());
}

BOOST_AUTO_TEST_CASE(a_running_request_moves_only_if_the_time_it_saves_pays_its_move) {
  // A congested source (8 running at 20 tok/s each) and a light destination (1 at 40): each
  // request has generated 400 tokens, so it saves about 400 x (1/20 - 1/40) = 10 s by moving.
  auto congested = [](double move_s) {
    std::vector<gen_worker> w{worker(0, 8, 0, 100000, 20, 0), worker(1, 1, 0, 100000, 40, 50)};
    for (auto& r : w[0].running) {
      r.generated = 400;
      r.move = {move_s, 1e9}; // a transfer; recomputing is out of the question
    }
    return w;
  };
  auto cheap = congested(2.0);
  auto moves = plan_migrations(cheap, {});
  BOOST_CHECK(!moves.empty());
  for (auto& m : moves)
    BOOST_CHECK(!m.was_waiting && m.from == 0 && m.to == 1);
  // The same imbalance, but moving the KV would take longer than the request has left.
  auto dear = congested(30.0);
  BOOST_CHECK(plan_migrations(dear, {}).empty());
  // Waiting requests carry no KV and move regardless.
  auto queued = congested(30.0);
  queued[0].waiting.push_back({999, 500});
  auto queue_moves = plan_migrations(queued, {});
  BOOST_REQUIRE_EQUAL(queue_moves.size(), 1u);
  BOOST_CHECK(queue_moves[0].was_waiting);
}

BOOST_AUTO_TEST_CASE(a_recompute_counts_the_destination_batch_it_pauses) {
  // Each request would save about 400 x (1/20 - 1/40) = 10 s. Its KV recomputes in 2 s or
  // transfers in 30: onto a destination running 1 request the recompute costs 2 x 2 = 4
  // request-seconds and pays; onto one running 8 it would pause all 8 (18 request-seconds), the
  // transfer costs 30, and neither pays.
  auto onto = [](int busy) {
    std::vector<gen_worker> w{worker(0, 16, 0, 100000, 20, 0), worker(1, busy, 0, 100000, 40, 50)};
    for (auto& r : w[0].running) {
      r.generated = 400;
      r.move = {30.0, 2.0};
    }
    return w;
  };
  auto light = onto(1);
  BOOST_CHECK(!plan_migrations(light, {}).empty());
  auto busy = onto(8);
  BOOST_CHECK(plan_migrations(busy, {}).empty());
}

BOOST_AUTO_TEST_CASE(a_pace_s_spread_follows_how_far_its_rate_swings) {
  pace_estimate steady;
  for (int i = 0; i < 40; ++i)
    steady.observe(40);
  BOOST_CHECK_CLOSE(steady.mean_tps(), 40, 1e-9);
  BOOST_CHECK_LT(steady.spread_tps(), 0.01);
  pace_estimate swinging;                    // ticks spent recomputing between decoding ones
  for (int i = 0; i < 40; ++i)
    swinging.observe(i % 2 ? 60 : 1);
  BOOST_CHECK_GT(swinging.spread_tps(), 20);
  BOOST_CHECK_GT(swinging.mean_tps(), 20);
  BOOST_CHECK_LT(swinging.mean_tps(), 45);
  BOOST_CHECK_CLOSE(swinging.peak_tps(), 60, 1e-9); // what it offers once idle
  steady.observe(0); // an idle tick says nothing of its pace
  BOOST_CHECK_CLOSE(steady.mean_tps(), 40, 1e-9);
}

BOOST_AUTO_TEST_CASE(a_gap_the_rates_own_swings_explain_moves_nothing) {
  // The move above that pays (20 vs 40 tok/s, 400 generated, 2 s to move): with each pace
  // swinging by 9 tok/s, the source may run at 29 and the destination at 31, which saves
  // 400 x (1/29 - 1/31) = 0.9 s, less than the move.
  auto noisy = [](double spread) {
    std::vector<gen_worker> w{worker(0, 8, 0, 100000, 20, 0), worker(1, 1, 0, 100000, 40, 50)};
    for (auto& x : w)
      x.rate_spread_tps = spread;
    for (auto& r : w[0].running) {
      r.generated = 400;
      r.move = {2.0, 1e9};
    }
    return w;
  };
  auto calm = noisy(1);
  BOOST_CHECK(!plan_migrations(calm, {}).empty());
  auto swinging = noisy(9);
  BOOST_CHECK(plan_migrations(swinging, {}).empty());
  // The source's rate this tick collapsed (it spent it recomputing): its pace is what counts.
  auto stalled = noisy(1);
  stalled[0].decode_rate_tps = 0.2;
  stalled[0].pace_tps = 38;
  BOOST_CHECK(plan_migrations(stalled, {}).empty());
}

BOOST_AUTO_TEST_CASE(a_moved_request_stays_put_for_the_cooldown) {
  balancer_params p;
  p.theta = 0.25;
  p.cooldown_ticks = 2;
  reactive_balancer b{p};
  // The same skewed loads every tick: the first tick moves request 100 from worker 1.
  const std::vector<gen_worker> skewed{worker(1, 4, 6, 0, 1000, 0),
                                       worker(2, 1, 0, 20000, 1000, 1000)};
  auto first = b.tick(skewed);
  BOOST_REQUIRE(!first.empty());
  BOOST_CHECK_EQUAL(first.front().request, 100u);
  BOOST_CHECK_EQUAL(b.pinned(), first.size());
  // Reported back on worker 1 (the engine has not moved it yet), it is pinned: tick 2 moves
  // other requests, never it.
  auto second = b.tick(skewed);
  for (auto& m : second)
    BOOST_CHECK_NE(m.request, 100u);
  // Two ticks after its move (the cooldown) it may move again.
  auto third = b.tick(skewed);
  BOOST_REQUIRE(!third.empty());
  BOOST_CHECK_EQUAL(third.front().request, 100u);
  BOOST_CHECK_EQUAL(b.ticks(), 3u);
  BOOST_CHECK_EQUAL(b.migrations(), first.size() + second.size() + third.size());
}

BOOST_AUTO_TEST_SUITE_END()

#include <random>

#include "generation/forecast.hpp"

BOOST_AUTO_TEST_SUITE(forecaster)

BOOST_AUTO_TEST_CASE(a_linear_trend_is_continued) {
  std::vector<double> y;
  for (int t = 0; t < 12; ++t)
    y.push_back(3.0 + 2.0 * t);
  auto m = arima::fit(y, {1, 1, 0});
  BOOST_REQUIRE(m);
  BOOST_CHECK_CLOSE(m->forecast(), 3.0 + 2.0 * 12, 1e-4);
}

BOOST_AUTO_TEST_CASE(a_noise_free_ar1_is_recovered_exactly) {
  std::vector<double> y{10.0};
  for (int t = 1; t < 20; ++t)
    y.push_back(0.5 + 0.7 * y.back());
  auto m = arima::fit(y, {1, 0, 0});
  BOOST_REQUIRE(m);
  BOOST_CHECK_CLOSE(m->ar().at(0), 0.7, 1e-3);
  BOOST_CHECK_CLOSE(m->constant(), 0.5, 1e-2);
  BOOST_CHECK_CLOSE(m->forecast(), 0.5 + 0.7 * y.back(), 1e-4);
}

BOOST_AUTO_TEST_CASE(noisy_ar_and_ma_coefficients_are_estimated) {
  std::mt19937_64 rng{11};
  std::normal_distribution<double> noise{0.0, 1.0};
  std::vector<double> ar{0.0};
  for (int t = 1; t < 4000; ++t)
    ar.push_back(0.6 * ar.back() + noise(rng));
  auto a = arima::fit(ar, {1, 0, 0});
  BOOST_REQUIRE(a);
  BOOST_CHECK_SMALL(a->ar()[0] - 0.6, 0.05);
  std::vector<double> ma;
  double prev = noise(rng);
  for (int t = 0; t < 4000; ++t) {
    double e = noise(rng);
    ma.push_back(e + 0.5 * prev);
    prev = e;
  }
  auto b = arima::fit(ma, {0, 0, 1});
  BOOST_REQUIRE(b);
  BOOST_CHECK_SMALL(b->ma()[0] - 0.5, 0.07);
}

BOOST_AUTO_TEST_CASE(too_short_a_history_falls_back_to_the_last_step) {
  BOOST_CHECK(!arima::fit({1.0, 2.0, 3.0}, {1, 1, 1}));
  histogram_forecaster f{3};
  f.observe({10, 20, 70});
  auto next = f.forecast(200);
  BOOST_CHECK_CLOSE(next[0], 20.0, 1e-9);
  BOOST_CHECK_CLOSE(next[2], 140.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(histogram_drift_is_extrapolated) {
  // Responses lengthen step by step: the long bin's share grows by 1% per step.
  histogram_forecaster f{2, 32, {1, 1, 0}};
  for (int step = 0; step < 10; ++step)
    f.observe({512.0 * (0.8 - 0.01 * step), 512.0 * (0.2 + 0.01 * step)});
  auto next = f.forecast(512);
  std::vector<double> truth{512.0 * 0.70, 512.0 * 0.30};
  BOOST_CHECK_CLOSE(next[1], truth[1], 0.1);
  BOOST_CHECK_LT(histogram_relative_error(next, truth), 1e-3);
  BOOST_CHECK_CLOSE(histogram_relative_error({0, 10}, {10, 0}), 2.0, 1e-9);
}

BOOST_AUTO_TEST_SUITE_END()

#include "generation/kv_migration.hpp"
#include "types/gpu.hpp"

BOOST_AUTO_TEST_CASE(kv_migration_picks_the_cheaper_way_as_in_appendix_a) {
  // App. A, Fig. 19: Qwen-32B at TP=8, one 200 Gbps NIC.
  engine_model e{*find_model("Qwen2.5-32B"), *find_builtin_gpu("H800")};
  auto tiny = kv_move_cost_of(e, 8, 1, 256);
  BOOST_CHECK(tiny.recompute()); // a small cache: recomputing beats the transfer's setup
  auto large = kv_move_cost_of(e, 8, 256, 8192);
  BOOST_CHECK(!large.recompute()); // more tokens and larger batches: transfer wins
  auto mid = kv_move_cost_of(e, 8, 32, 2048);
  BOOST_CHECK(!mid.recompute());
  kv_transfer_path slow;
  slow.nic_gbps = 10; // bandwidth-limited: the same move is cheaper recomputed
  BOOST_CHECK(kv_move_cost_of(e, 8, 32, 2048, slow).recompute());
  kv_transfer_path wide;
  wide.nics = 8; // several NICs: transfer faster still
  BOOST_CHECK_LT(kv_move_cost_of(e, 8, 32, 2048, wide).transfer_s, mid.transfer_s);
  BOOST_CHECK_EQUAL(mid.best_s(), mid.transfer_s);
  // Onto a busy instance a recompute pauses its running batch as well: the tiny move that
  // recomputes onto a drained instance transfers onto one running 64 requests.
  BOOST_CHECK(!tiny.recompute(64));
  BOOST_CHECK_EQUAL(tiny.best_s(64), tiny.transfer_s);
  BOOST_CHECK_CLOSE(tiny.best_s(0), tiny.recompute_s, 1e-9);
}
