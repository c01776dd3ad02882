// The live phase shim on loopback with CURVE on, measured end to end through real ZeroMQ
// sockets, the ZAP handshake, the client's I/O thread, the gateway, the real scheduler and
// group executors and a RocksDB store (synced writes, as `serve` runs):
// - PhaseAcquire -> PhaseGrant round trip for a phase its executor has already permitted
//   (what the shim pays when the turn has come; waiting for the turn is the schedule, not
//   overhead). N workers (64 by default), each driving its own job in its own group through
//   rollout, training and sync, at exponentially distributed intervals (seeded, mean 20 ms
//   per worker). Goal: p50 < 100 us, p99 < 300 us. Also with all of them back to back.
// - PhaseRelease -> Ok, the same loop: the executor's bookkeeping (and, at an iteration's end,
//   the durable record of its progress) included.
// - One worker back to back against its floor, a bare cppzmq CURVE echo (DEALER to ROUTER on
//   loopback, the server thread answering at once): the ratio is what Loom's hops cost.
//   Goal: at most 2x.
// - Progress reports, one-way, from 4 senders through the client library: messages the
//   gateway handles per second (goal: at least 100,000/s), beside its floor, the same frames
//   from 4 bare DEALERs into a bare CURVE ROUTER that only receives (goal: at least 0.7 of it).
// The actors run on the scheduler `serve` runs them on (use_live_scheduler).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "gateway/gateway.hpp"
#include "gateway/keys.hpp"
#include "loom.pb.h"
#include "loom/client.hpp"
#include "metrics/metrics.hpp"
#include "protocol/inspect.hpp"
#include "protocol/live_scheduler.hpp"
#include "protocol/type_registry.hpp"
#include "scheduler/cluster_scheduler.hpp"
#include "store/store_actor.hpp"

using namespace loom;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int rounds = 100; // iterations per worker, three phases each

/// One node of 8 GPUs per worker in each pool: every job gets a group of its own.
cluster bench_cluster(int workers) {
  cluster c;
  c.name = "bench";
  c.cross_link_gbps = 20;
  c.gpus = builtin_gpus();
  for (int i = 0; i < workers; ++i) {
    c.rollout.push_back({"r" + std::to_string(i), pool_kind::rollout, "H20", 8, 2048});
    c.training.push_back({"t" + std::to_string(i), pool_kind::training, "H800", 8, 2048});
  }
  return c;
}

rl_job bench_job(const std::string& id) {
  rl_job j;
  j.id = id;
  j.rollout_gpus = j.training_gpus = 8;
  j.rollout_memory_gb = j.training_memory_gb = 1;
  j.slo = 4.0;
  j.rollout_s = j.training_s = 1;
  return j;
}

struct samples {
  std::vector<double> acquire_us;
  std::vector<double> release_us;
  std::vector<double> floor_us;
};

void report(const char* what, int workers, const char* label, std::vector<double> all,
            bool goal, int failures) {
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all.empty() ? 0.0 : all[size_t(q * double(all.size() - 1))]; };
  std::printf("%s, CURVE, %d workers, %s, %zu samples: p50 %.1f us, p99 %.1f us, max %.1f us%s%s\n",
              what, workers, label, all.size(), pct(0.5), pct(0.99),
              all.empty() ? 0.0 : all.back(), goal ? " (goal: p50 < 100 us, p99 < 300 us)" : "",
              failures ? " FAILURES" : "");
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0.0 : xs[xs.size() / 2];
}

/// The floor of a grant round trip: a DEALER's frame echoed by a ROUTER's own thread over
/// CURVE on loopback.
class curve_echo {
public:
  curve_echo() {
    auto server_keys = *generate_keypair();
    auto client_keys = *generate_keypair();
    router_.set(zmq::sockopt::curve_server, 1);
    router_.set(zmq::sockopt::curve_secretkey, server_keys.secret_key);
    router_.bind("tcp://127.0.0.1:*");
    dealer_.set(zmq::sockopt::curve_serverkey, server_keys.public_key);
    dealer_.set(zmq::sockopt::curve_publickey, client_keys.public_key);
    dealer_.set(zmq::sockopt::curve_secretkey, client_keys.secret_key);
    dealer_.connect(router_.get(zmq::sockopt::last_endpoint));
    echo_ = std::thread{[this] {
      zmq::message_t id, body;
      while (router_.recv(id) && router_.recv(body) && body.size() > 0) {
        router_.send(id, zmq::send_flags::sndmore);
        router_.send(body, zmq::send_flags::none);
      }
    }};
    round_trip_us(); // the handshake
  }
  ~curve_echo() {
    dealer_.send(zmq::message_t{}, zmq::send_flags::none); // an empty frame ends the echo
    echo_.join();
  }

  double round_trip_us() {
    const std::string frame(64, 'x'); // about a PhaseAcquire's size
    auto t0 = clock_type::now();
    dealer_.send(zmq::buffer(frame), zmq::send_flags::none);
    zmq::message_t back;
    (void)dealer_.recv(back);
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
  }

private:
  zmq::context_t ctx_;
  zmq::socket_t router_{ctx_, zmq::socket_type::router};
  zmq::socket_t dealer_{ctx_, zmq::socket_type::dealer};
  std::thread echo_;
};

/// The floor of progress reports: `senders` DEALERs, each on its own thread, sending `each`
/// frames of `frame`'s bytes over CURVE to a bare ROUTER that only receives them; frames per
/// second until the last is in.
double router_sink_rate(int senders, int each, const std::string& frame) {
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  auto server_keys = *generate_keypair();
  router.set(zmq::sockopt::curve_server, 1);
  router.set(zmq::sockopt::curve_secretkey, server_keys.secret_key);
  router.set(zmq::sockopt::rcvhwm, 0);
  router.bind("tcp://127.0.0.1:*");
  const auto endpoint = router.get(zmq::sockopt::last_endpoint);
  std::vector<std::thread> threads;
  auto start = clock_type::now();
  for (int i = 0; i < senders; ++i)
    threads.emplace_back([&] {
      auto keys = *generate_keypair();
      zmq::socket_t dealer{ctx, zmq::socket_type::dealer};
      dealer.set(zmq::sockopt::curve_serverkey, server_keys.public_key);
      dealer.set(zmq::sockopt::curve_publickey, keys.public_key);
      dealer.set(zmq::sockopt::curve_secretkey, keys.secret_key);
      dealer.set(zmq::sockopt::sndhwm, 0);
      dealer.set(zmq::sockopt::linger, -1); // every frame goes out before close
      dealer.connect(endpoint);
      for (int k = 0; k < each; ++k)
        dealer.send(zmq::buffer(frame), zmq::send_flags::none);
    });
  zmq::message_t id, body;
  for (int n = 0; n < senders * each;)
    if (router.recv(id) && router.recv(body))
      ++n;
  const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  for (auto& t : threads)
    t.join();
  return senders * each / secs;
}

/// One worker's loop: each iteration acquires and releases rollout, training and sync.
int drive(client& c, const std::string& job, bool paced, uint64_t seed, samples& out,
          curve_echo* floor = nullptr) {
  std::mt19937_64 rng{seed};
  std::exponential_distribution<double> gap{1.0 / 0.020};
  for (int r = 0; r < rounds; ++r)
    for (auto phase : {"rollout", "training", "sync"}) {
      if (paced)
        std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
      if (floor) // side by side: the floor's round trip, then the grant's
        out.floor_us.push_back(floor->round_trip_us());
      auto t0 = clock_type::now();
      if (!c.acquire(job, phase, std::chrono::seconds{10}))
        return 1;
      auto t1 = clock_type::now();
      if (c.release(job, phase, 0.01))
        return 1;
      auto t2 = clock_type::now();
      out.acquire_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      out.release_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const int workers = argc > 1 ? std::max(1, std::atoi(argv[1])) : 64; // the goal's 64 by default
  constexpr int progress_senders = 4;
  constexpr int progress_each = 50000;

  // Per-grant lines are not what is measured; nor are the overruns of the permits the workers
  // leave unclaimed when their run ends.
  spdlog::set_level(spdlog::level::err);
  auto dir = std::filesystem::temp_directory_path() / ("loom-bench-gateway-" + std::to_string(getpid()));
  caf::actor_system_config cfg;
  register_loom_types(cfg);
  use_live_scheduler(cfg);
  caf::actor_system sys{cfg};
  auto metrics = std::make_shared<service_metrics>();
  auto db = database::open(dir.string());
  if (!db) {
    std::fprintf(stderr, "bench_gateway: %s\n", caf::to_string(db.error()).c_str());
    return 1;
  }
  auto store_handle = sys.spawn(store, std::shared_ptr<database>{std::move(*db)}, metrics);
  zmq_server_config zc;
  zc.endpoint = "tcp://127.0.0.1:0";
  zc.server = *generate_keypair();
  std::vector<curve_keypair> keys;
  const int jobs = 2 * workers + 1; // the paced run's, the back-to-back run's, the lone worker's
  for (int i = 0; i < std::max(jobs, progress_senders); ++i) {
    keys.push_back(*generate_keypair());
    zc.clients[keys.back().public_key] = worker_role::driver;
  }
  auto opened = zmq_server::open(zc, [] {});
  if (!opened) {
    std::fprintf(stderr, "bench_gateway: %s\n", caf::to_string(opened.error()).c_str());
    return 1;
  }
  std::shared_ptr<zmq_server> server = std::move(*opened);
  gateway_config gc;
  gc.heartbeat_ms = 2000;
  // Each progress sender sends at full speed; the limiters run (their cost is measured) but
  // limit none of them (a session's default, 20,000 frames/s, dropped reports once the client
  // sent faster, and the run waited for them forever).
  gc.frames_per_s_per_key = 10'000'000;
  gc.frames_per_s_per_session = 10'000'000;
  auto gw = sys.spawn(gateway, gc, server, metrics);
  weave_policy alone; // every job in a group of its own: no job waits for another's turn
  alone.max_group_size = 1;
  cluster_scheduler_config sc{bench_cluster(jobs), alone, true, true, {}, {}};
  auto scheduler = sys.spawn(cluster_scheduler, sc, store_handle,
                             caf::actor_cast<worker_actor>(gw), observer_actor{});
  caf::anon_send(gw, connect_atom::value, scheduler, fabric_controller_actor{});
  server->run([gw](std::vector<wire_frame> frames) {
    caf::anon_send(gw, frame_atom::value, std::move(frames));
  });
  {
    caf::scoped_actor self{sys};
    for (int i = 0; i < jobs; ++i)
      self->request(scheduler, caf::infinite, submit_atom::value,
                    bench_job("job-" + std::to_string(i)))
        .receive([](const placement_reply&) {}, [](caf::error&) {});
  }
  auto make_client = [&](int i) {
    client_options o;
    o.endpoint = server->endpoint();
    o.server_public_key = zc.server.public_key;
    o.public_key = keys[size_t(i)].public_key;
    o.secret_key = keys[size_t(i)].secret_key;
    o.timeout = std::chrono::seconds{10};
    return std::make_unique<client>(o);
  };

  // -- phase round trips --------------------------------------------------------------------
  auto round_trips = [&](int workers, bool paced, const char* label, int first,
                         curve_echo* floor = nullptr) {
    std::vector<samples> per(static_cast<size_t>(workers));
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int i = 0; i < workers; ++i)
      threads.emplace_back([&, i] {
        auto c = make_client(first + i);
        auto job = "job-" + std::to_string(first + i);
        if (!c->register_worker("driver", "w" + std::to_string(first + i), job)) {
          ++failures;
          return;
        }
        failures += drive(*c, job, paced, uint64_t(i) + 1, per[size_t(i)], floor);
        c->goodbye("done", false);
      });
    for (auto& t : threads)
      t.join();
    samples all;
    for (auto& s : per) {
      all.acquire_us.insert(all.acquire_us.end(), s.acquire_us.begin(), s.acquire_us.end());
      all.release_us.insert(all.release_us.end(), s.release_us.begin(), s.release_us.end());
      all.floor_us.insert(all.floor_us.end(), s.floor_us.begin(), s.floor_us.end());
    }
    report("grant round trip (permitted phase)", workers, label, all.acquire_us, true, failures);
    report("release round trip", workers, label, all.release_us, false, failures);
    return std::tuple{failures.load(), median(all.acquire_us), median(all.floor_us)};
  };
  // The lone worker first, while nothing else runs, each grant beside a floor round trip.
  auto [failures, lone_us, echo_us] = [&] {
    curve_echo floor;
    return round_trips(1, false, "back to back", 2 * workers, &floor);
  }();
  failures += std::get<0>(round_trips(workers, true, "each at exponential intervals (mean 20 ms)", 0));
  failures += std::get<0>(round_trips(workers, false, "all back to back", workers));
  std::printf("grant round trip, one worker back to back: p50 %.1f us; bare cppzmq CURVE echo "
              "beside it p50 %.1f us; ratio %.2f (goal: <= 2)\n",
              lone_us, echo_us, lone_us / echo_us);

  // -- progress throughput ------------------------------------------------------------------------
  std::vector<std::thread> threads;
  auto& handled = metrics->gateway_messages("in", "progress");
  auto start = clock_type::now();
  for (int i = 0; i < progress_senders; ++i)
    threads.emplace_back([&, i] {
      auto c = make_client(i);
      auto job = "job-" + std::to_string(i);
      c->register_worker("driver", "p" + std::to_string(i), job);
      for (int k = 0; k < progress_each; ++k)
        c->progress(job, uint32_t(k), 1000000);
      // Stay connected until the gateway has read everything (or gives up on it).
      const auto limit = clock_type::now() + std::chrono::seconds{60};
      while (handled.Value() < double(progress_senders * progress_each)
             && clock_type::now() < limit)
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    });
  for (auto& t : threads)
    t.join();
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  if (handled.Value() < double(progress_senders * progress_each)) {
    std::printf("progress reports: the gateway handled %.0f of %d in 60 s\n", handled.Value(),
                progress_senders * progress_each);
    ++failures;
  }
  const double loom_rate = progress_senders * progress_each / secs;
  std::printf("progress reports, CURVE, %d senders: %d messages in %.3f s = %.0f messages/s "
              "handled by the gateway (goal: >= 100,000/s)\n",
              progress_senders, progress_senders * progress_each, secs, loom_rate);
  v1::Envelope sample; // the frame a client sends for one report
  sample.mutable_progress()->set_job("job-0");
  sample.mutable_progress()->set_responses_done(progress_each - 1);
  sample.mutable_progress()->set_responses_total(1000000);
  const double floor_rate =
    router_sink_rate(progress_senders, progress_each, sample.SerializeAsString());
  std::printf("progress reports, the same %d senders' frames into a bare cppzmq CURVE ROUTER: "
              "%.0f messages/s; through Loom (client library and gateway) / bare: %.2f (goal: "
              ">= 0.7)\n",
              progress_senders, floor_rate, loom_rate / floor_rate);
  server->stop();
  for (auto a : {caf::actor_cast<caf::actor>(gw), caf::actor_cast<caf::actor>(scheduler),
                 caf::actor_cast<caf::actor>(store_handle)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  sys.await_all_actors_done();
  std::filesystem::remove_all(dir);
  return failures ? 1 : 0;
}
