// The gateway on loopback with CURVE on, measured end to end through real ZeroMQ sockets, the
// ZAP handshake, the I/O thread and the gateway actor (one CAF scheduler thread):
// - PhaseAcquire -> PhaseGrant round trip with 64 concurrent workers connected, each
//   acquiring a phase the executor has just granted (what the shim pays when its turn has
//   come; waiting for the turn is the schedule, not overhead) at exponentially distributed
//   intervals (seeded, mean 20 ms per worker: 3,200 acquires/s in all). Goal: p50 < 100 us,
//   p99 < 300 us. Also the same with all 64 firing back to back (the thundering herd).
// - Progress reports, one-way, from 4 senders: messages the gateway handles per second.
//   Goal: at least 100,000/s.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/inspect.hpp"
#include "core/metrics.hpp"
#include "core/type_registry.hpp"
#include "gateway/gateway.hpp"
#include "gateway/keys.hpp"
#include "loom.pb.h"
#include "loom/client.hpp"

using namespace loom;
using clock_type = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const int workers = argc > 1 ? std::max(1, std::atoi(argv[1])) : 64; // the goal's 64 by default
  constexpr int rounds = 200;
  constexpr int progress_senders = 4;
  constexpr int progress_each = 50000;

  spdlog::set_level(spdlog::level::warn); // the per-grant log line is not what is measured
  caf::actor_system_config cfg;
  register_loom_types(cfg);
  cfg.set("scheduler.max-threads", 1);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  auto metrics = std::make_shared<service_metrics>();
  zmq_server_config zc;
  zc.endpoint = "tcp://127.0.0.1:0";
  zc.server = *generate_keypair();
  std::vector<curve_keypair> keys;
  for (int i = 0; i < std::max(workers, progress_senders); ++i) {
    keys.push_back(*generate_keypair());
    zc.clients[keys.back().public_key] = worker_role::rollout;
  }
  auto opened = zmq_server::open(zc, [] {});
  if (!opened) {
    std::fprintf(stderr, "bench_gateway: %s\n", caf::to_string(opened.error()).c_str());
    return 1;
  }
  std::shared_ptr<zmq_server> server = std::move(*opened);
  gateway_config gc;
  gc.heartbeat_ms = 2000;
  auto gw = sys.spawn(gateway, gc, server, metrics);
  server->run([gw](wire_frame f) { caf::anon_send(gw, frame_atom::value, std::move(f)); });
  auto endpoint = server->endpoint();

  auto make_client = [&](int i) {
    client_options o;
    o.endpoint = endpoint;
    o.server_public_key = zc.server.public_key;
    o.public_key = keys[size_t(i)].public_key;
    o.secret_key = keys[size_t(i)].secret_key;
    o.timeout = std::chrono::seconds{10};
    return std::make_unique<client>(o);
  };

  // -- grant round trips ------------------------------------------------------------------------
  auto round_trips = [&](bool paced, const char* label, int first_id) {
  std::vector<std::vector<double>> samples(workers);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < workers; ++i)
    threads.emplace_back([&, i] {
      auto c = make_client(i);
      auto job = "job-" + std::to_string(first_id + i);
      if (!c->register_worker("rollout", "w" + std::to_string(first_id + i), job)) {
        ++failures;
        return;
      }
      std::mt19937_64 rng{uint64_t(i) + 1};
      std::exponential_distribution<double> gap{1.0 / 0.020};
      for (int r = 0; r < rounds; ++r) {
        if (paced)
          std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
        caf::anon_send(gw, run_atom::value, phase_grant{job, phase_kind::rollout, 8, 0, false});
        auto t0 = clock_type::now();
        if (!c->acquire(job, "rollout", std::chrono::seconds{10})) {
          ++failures;
          return;
        }
        samples[size_t(i)].push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
      }
    });
  for (auto& t : threads)
    t.join();
  std::vector<double> all;
  for (auto& s : samples)
    all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all.empty() ? 0.0 : all[size_t(q * double(all.size() - 1))]; };
  std::printf("grant round trip, CURVE, %d workers, %s, %zu samples: p50 %.1f us, p99 %.1f us, "
              "max %.1f us (goal: p50 < 100 us, p99 < 300 us)%s\n",
              workers, label, all.size(), pct(0.5), pct(0.99), all.empty() ? 0.0 : all.back(),
              failures ? " FAILURES" : "");
  return failures.load();
  };
  int failures = round_trips(true, "each at exponential intervals (mean 20 ms)", 0);
  failures += round_trips(false, "all back to back", 1000);
  std::vector<std::thread> threads;

  // -- progress throughput ------------------------------------------------------------------------
  auto& handled = metrics->gateway_messages("in", "progress");
  auto start = clock_type::now();
  for (int i = 0; i < progress_senders; ++i)
    threads.emplace_back([&, i] {
      auto c = make_client(i);
      c->register_worker("rollout", "p" + std::to_string(i), "job-" + std::to_string(2000 + i));
      v1::Envelope e;
      e.mutable_progress()->set_job("job-" + std::to_string(i));
      e.mutable_progress()->set_responses_total(1000000);
      for (int k = 0; k < progress_each; ++k) {
        e.mutable_progress()->set_responses_done(uint32_t(k));
        c->send(e);
      }
      // Stay connected until the gateway has read everything.
      while (handled.Value() < double(progress_senders * progress_each))
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    });
  for (auto& t : threads)
    t.join();
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  std::printf("progress reports, CURVE, %d senders: %d messages in %.3f s = %.0f messages/s "
              "handled by the gateway (goal: >= 100,000/s)\n",
              progress_senders, progress_senders * progress_each, secs,
              progress_senders * progress_each / secs);
  server->stop();
  caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
  return failures ? 1 : 0;
}
