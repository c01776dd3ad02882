// Opus's control path as Loom runs it live: a real `loom serve` on conf/opus-rails.toml (CURVE
// on, emulated rails), collective shims on libloomclient, TopoWrite -> TopoAck round trips
// that change nothing on the rails (O1: what each collective pays in control when its
// topology is already there), alone and as the two writers of a PP Send/Recv barrier (both
// wait for the later one: rank synchronisation through the controller). The Opus replay's
// per-write control time (opus-table2.toml, control_ms) is this p50, and what each further
// rank adds to a barrier (control_per_rank_ms) the two-writer p50 minus the one-writer p50.
//
//   bench_topo_write [WRITES]      default 2,000 per measurement

#include <algorithm>
#include <barrier>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/support.hpp"
#include "loom.pb.h"
#include "loom/client.hpp"
#include "tests/support/process.hpp"

namespace lt = loom::test;
using loom::bench::clock_type;

namespace {

/// conf/opus-rails.toml on this run's port and storage, with a shim key.
std::string config(int port, const std::string& db, const std::string& shim_key) {
  auto text = lt::read_file(LOOM_SOURCE_ROOT "/conf/opus-rails.toml");
  auto replace = [&](const std::string& from, const std::string& to) {
    auto at = text.find(from);
    if (at != std::string::npos)
      text.replace(at, from.size(), to);
  };
  replace("gateway = \"tcp://127.0.0.1:5555\"", fmt::format("gateway = \"tcp://127.0.0.1:{}\"", port));
  replace("path = \"var/opus\"", fmt::format("path = \"{}\"\nsync_writes = true", db));
  return text + fmt::format("\n[security.clients]\ncollective-shim = [\"{}\"]\n", shim_key);
}

loom::client_options keys(const lt::temp_dir& dir, int port) {
  loom::client_options o;
  o.endpoint = fmt::format("tcp://127.0.0.1:{}", port);
  o.server_public_key = loom::read_key(dir / "db/keys/server.pub");
  o.public_key = loom::read_key(dir / "keys/shim.pub");
  o.secret_key = loom::read_key(dir / "keys/shim.secret");
  o.timeout = std::chrono::seconds{10};
  return o;
}

loom::v1::Envelope write_of(const std::string& group, uint64_t index, uint32_t size,
                            uint32_t stage, uint32_t digit) {
  loom::v1::Envelope e;
  auto* w = e.mutable_topo_write();
  w->set_job("bench");
  w->set_group(group);
  w->set_op_index(index);
  w->set_group_size(size);
  w->set_stage(stage);
  w->set_digit(digit);
  return e;
}

void report(const char* what, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto pct = [&](double q) { return us[size_t(q * double(us.size() - 1))]; };
  std::printf("%s, CURVE, %zu writes: p50 %.1f us, p99 %.1f us, max %.1f us\n", what, us.size(),
              pct(0.5), pct(0.99), us.back());
}

} // namespace

int main(int argc, char** argv) {
  const int writes = argc > 1 ? std::max(10, std::atoi(argv[1])) : 2000;
  lt::temp_dir dir;
  if (lt::run({loom::bench::loom_binary(), "keygen", "shim", "--out", dir / "keys"}).exit_code != 0)
    return 1;
  const int port = lt::free_tcp_port();
  lt::write_file(dir / "loom.toml", config(port, dir / "db", dir / "keys/shim.pub"));
  lt::child_process serve{{loom::bench::loom_binary(), "serve", "-c", dir / "loom.toml", "--log-level", "warn"}};
  for (int i = 0; i < 600 && lt::read_file(dir / "db/keys/server.pub").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  loom::client a{keys(dir, port)}, b{keys(dir, port)};
  if (!a.register_worker("collective-shim", "shim-a", "bench")
      || !b.register_worker("collective-shim", "shim-b", "bench")) {
    std::fprintf(stderr, "bench_topo_write: the shims could not register\n");
    return 1;
  }
  loom::v1::Envelope job;
  auto* j = job.mutable_opus_job();
  j->set_job("bench");
  j->set_pp(2);
  j->add_symmetrical(2);
  for (auto* r : {"rail0", "rail1", "rail2", "rail3"})
    j->add_rails(r);
  j->set_initial("00");
  if (auto r = a.call(job); !r || !r->has_opus_registered()) {
    std::fprintf(stderr, "bench_topo_write: OpusJob refused\n");
    return 1;
  }
  // One writer, nothing to change: shim -> gateway -> controller (barrier of one, O1) -> ack.
  std::vector<double> alone;
  for (int i = 0; i < writes; ++i) {
    auto t0 = clock_type::now();
    auto r = a.call(write_of("dp0", uint64_t(i), 1, 0, 0));
    if (!r || !r->has_topo_ack())
      return 1;
    alone.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  report("topo_write round trip, one writer, O1", alone);
  // Both ends of a PP Send/Recv, released together each round: each waits for the other.
  std::vector<double> pair(size_t(2 * writes));
  std::barrier start{2};
  auto writer = [&](loom::client& c, uint32_t stage) {
    for (int i = 0; i < writes; ++i) {
      start.arrive_and_wait();
      auto t0 = clock_type::now();
      auto r = c.call(write_of("pp0-1", uint64_t(i), 2, stage, 0));
      if (!r || !r->has_topo_ack())
        std::exit(1);
      pair[size_t(2 * i + stage)] =
        std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
    }
  };
  std::thread other{[&] { writer(b, 1); }};
  writer(a, 0);
  other.join();
  report("topo_write round trip, two-writer barrier (PP), O1", pair);
  serve.send_signal(SIGTERM);
  return serve.wait(std::chrono::seconds{10}) ? 0 : 1;
}
