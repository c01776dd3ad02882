// Hostile peers against real processes: does memory stay flat?
// - Gateway: a real `loom serve` (CURVE on) and four authenticated senders (admin, a driver, a
//   rollout worker, a collective shim) sending N mutated frames as fast as the service takes
//   them: half are byte-level mutations of the committed fuzz corpus, half valid envelopes
//   with attacker-chosen names (unknown jobs, fresh worker ids, long strings). Frame limits
//   are off so every frame is decoded and dispatched (the worst case for kept state).
// - TL1: `loom ocs-emu` and eight logged-in TCP clients sending N mutated commands.
// Reports inputs per second and the process's RSS: after warm-up, at its peak, and once the
// senders have gone (sessions expired). Goal: RSS after within 10% of the warm-up figure.
//
//   bench_hostile [N]     default 1,000,000 frames and 1,000,000 TL1 commands

#include <atomic>
#include <csignal>
#include <utility>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <zmq.hpp>

#include "bench/support.hpp"
#include "loom.pb.h"
#include "tests/support/live_service.hpp"

namespace lt = loom::test;
using namespace std::chrono_literals;
using loom::bench::clock_type;

namespace {

long rss_kb(pid_t pid) {
  std::ifstream f{fmt::format("/proc/{}/status", pid)};
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return 0;
}

/// Samples a process's RSS every 50 ms while alive; keeps the peak.
class rss_monitor {
public:
  explicit rss_monitor(pid_t pid) : pid_(pid), thread_([this] {
    while (!stop_) {
      peak_ = std::max(peak_.load(), rss_kb(pid_));
      std::this_thread::sleep_for(50ms);
    }
  }) {}
  ~rss_monitor() {
    stop_ = true;
    thread_.join();
  }
  long now() const { return rss_kb(pid_); }
  long peak() const { return peak_; }

private:
  pid_t pid_;
  std::atomic<long> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::vector<std::string> corpus(const std::string& name) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(lt::source_path("fuzz/corpus/" + name)))
    out.push_back(lt::read_file(e.path().string()));
  return out;
}

std::string random_text(std::mt19937_64& rng, size_t max) {
  std::string s(rng() % max + 1, 'x');
  for (auto& c : s)
    c = char('a' + rng() % 26);
  return s;
}

/// Byte-level: flips, inserts, deletes, truncations and splices of corpus entries.
std::string mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  auto s = seeds[rng() % seeds.size()];
  for (int k = int(rng() % 4) + 1; k > 0; --k) {
    auto at = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 5) {
      case 0:
        if (!s.empty())
          s[at] = char(rng());
        break;
      case 1: s.insert(at, std::string(rng() % 16 + 1, char(rng()))); break;
      case 2: s.erase(at, rng() % 8); break;
      case 3: s.resize(at); break;
      default: s += seeds[rng() % seeds.size()]; break;
    }
  }
  return s;
}

/// A valid envelope with attacker-chosen names: what used to leave state behind.
std::string named(std::mt19937_64& rng) {
  loom::v1::Envelope e;
  e.set_version(1);
  e.set_request_id(rng() % 3 == 0 ? 0 : rng());
  auto name = random_text(rng, 300);
  switch (rng() % 6) {
    case 0:
      e.mutable_phase_acquire()->set_job(name);
      e.mutable_phase_acquire()->set_phase(loom::v1::PHASE_ROLLOUT);
      break;
    case 1:
      e.mutable_progress()->set_job(name);
      e.mutable_progress()->set_responses_total(10);
      break;
    case 2:
      e.mutable_register_()->set_role(loom::v1::ROLE_COLLECTIVE_SHIM);
      e.mutable_register_()->set_worker_id(name);
      e.mutable_register_()->set_job(name);
      break;
    case 3: e.mutable_inspect_job()->set_job(name); break;
    case 4: e.mutable_staged()->set_job(name); break;
    default: e.mutable_goodbye()->set_reason(random_text(rng, 20000)); break;
  }
  return e.SerializeAsString();
}

struct flood_result {
  uint64_t sent = 0;
  uint64_t answers = 0;
};

void flood_gateway(const loom::client_options& k, uint64_t frames, uint64_t seed,
                   const std::vector<std::string>& seeds, flood_result& out) {
  zmq::context_t ctx;
  zmq::socket_t s{ctx, zmq::socket_type::dealer};
  s.set(zmq::sockopt::curve_serverkey, k.server_public_key);
  s.set(zmq::sockopt::curve_publickey, k.public_key);
  s.set(zmq::sockopt::curve_secretkey, k.secret_key);
  s.set(zmq::sockopt::linger, 0);
  s.connect(k.endpoint);
  std::mt19937_64 rng{seed};
  auto drain = [&] {
    zmq::message_t m;
    while (s.recv(m, zmq::recv_flags::dontwait))
      ++out.answers;
  };
  for (uint64_t i = 0; i < frames; ++i) {
    auto frame = rng() % 2 ? mutate(seeds, rng) : named(rng);
    while (!s.send(zmq::buffer(frame), zmq::send_flags::dontwait)) {
      drain();
      std::this_thread::sleep_for(100us);
    }
    ++out.sent;
    if (i % 64 == 0)
      drain();
  }
  for (auto until = clock_type::now() + 5s; clock_type::now() < until;) {
    drain();
    std::this_thread::sleep_for(10ms);
  }
}

void gateway_part(uint64_t frames) {
  lt::live_service s{{.fabric = false, .security = "frames_per_s_per_key = 0\n"}};
  auto serve = s.serve();
  if (s.admin({"submit", s.job_file("target", 1)}).exit_code != 0)
    throw std::runtime_error("cannot submit the target job");
  rss_monitor rss{serve->pid()};
  auto seeds = corpus("envelope");
  std::vector<std::string> who{"admin", "driver-a", "rollout-1", "shim"};
  auto run = [&](uint64_t n, uint64_t seed) {
    std::vector<flood_result> results(who.size());
    std::vector<std::thread> senders;
    for (size_t i = 0; i < who.size(); ++i)
      senders.emplace_back(flood_gateway, s.keys(who[i]), n / who.size(), seed + i,
                           std::cref(seeds), std::ref(results[i]));
    for (auto& t : senders)
      t.join();
    flood_result total;
    for (auto& r : results) {
      total.sent += r.sent;
      total.answers += r.answers;
    }
    return total;
  };
  run(40'000, 1); // warm-up: allocator pools, protobuf arenas, metric families
  std::this_thread::sleep_for(4s); // its sessions expire (3 s without heartbeats)
  auto base = rss.now();
  auto t0 = clock_type::now();
  auto total = run(frames, 100);
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count() - 5; // less drain
  auto at_end = rss.now();
  std::this_thread::sleep_for(4s);
  auto after = rss.now();
  bool alive = s.admin({"jobs"}).exit_code == 0;
  std::printf("gateway: %llu mutated frames from 4 keys in %.1f s (%.0f/s), %llu answers; serve "
              "RSS %.1f MiB after warm-up, peak %.1f, %.1f at the end, %.1f once the senders "
              "had gone: %+.1f%%; still serving: %s\n",
              (unsigned long long)total.sent, secs, double(total.sent) / secs,
              (unsigned long long)total.answers, base / 1024.0, rss.peak() / 1024.0,
              at_end / 1024.0, after / 1024.0, 100.0 * double(after - base) / double(base),
              alive ? "yes" : "NO");
  serve->send_signal(SIGTERM);
  serve->wait(lt::live_limit);
}

struct tl1_result {
  uint64_t sent = 0;     // commands written
  uint64_t received = 0; // reply bytes
  uint64_t sessions = 0; // connections it took (the emulator closes a session it times out)
};

/// A logged-in TL1 client: writes mutated commands (reconnecting if the emulator closes it)
/// while a reader takes whatever comes back.
void flood_tl1(int port, uint64_t commands, uint64_t seed, const std::vector<std::string>& seeds,
               tl1_result& out) {
  std::mt19937_64 rng{seed};
  boost::asio::io_context io;
  while (out.sent < commands) {
    boost::asio::ip::tcp::socket sock{io};
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), uint16_t(port)});
    ++out.sessions;
    std::atomic<uint64_t> received = 0;
    // The reader ends at the marker's reply: every command before it has been answered.
    std::thread reader([&] {
      std::vector<char> buf(65536);
      std::string tail;
      boost::system::error_code ec;
      while (tail.find("M  END1") == std::string::npos) {
        auto n = sock.read_some(boost::asio::buffer(buf), ec);
        if (ec)
          return;
        received += n;
        tail = tail.substr(tail.size() > 8 ? tail.size() - 8 : 0) + std::string(buf.data(), n);
      }
    });
    boost::system::error_code ec;
    boost::asio::write(sock, boost::asio::buffer(std::string{"ACT-USER::admin:1::root;"}), ec);
    while (!ec && out.sent < commands) {
      std::string batch;
      uint64_t in_batch = 0;
      for (; in_batch < 256 && out.sent + in_batch < commands; ++in_batch)
        batch += mutate(seeds, rng) + ';';
      boost::asio::write(sock, boost::asio::buffer(batch), ec);
      if (!ec)
        out.sent += in_batch;
    }
    boost::asio::write(sock, boost::asio::buffer(std::string{"RTRV-HDR:::END1;"}), ec);
    if (ec)
      sock.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    reader.join();
    sock.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    out.received += received;
  }
}

void tl1_part(uint64_t commands) {
  lt::child_process emu{{lt::loom_binary(), "ocs-emu", "--port", "0"}};
  int port = 0;
  emu.read_until(
    true,
    [&](const std::string& l) {
      auto pos = l.find("event=ocs_emu_listening");
      if (pos != std::string::npos)
        port = std::stoi(l.substr(l.find("port=", pos) + 5));
      return pos != std::string::npos;
    },
    lt::live_limit);
  if (port == 0)
    throw std::runtime_error("ocs-emu did not start: " + emu.stderr_text());
  rss_monitor rss{emu.pid()};
  auto seeds = corpus("tl1");
  constexpr int clients = 8;
  auto run = [&](uint64_t n, uint64_t seed) {
    std::vector<tl1_result> results(clients);
    std::vector<std::thread> ts;
    for (int i = 0; i < clients; ++i)
      ts.emplace_back(flood_tl1, port, n / clients, seed + i, std::cref(seeds),
                      std::ref(results[i]));
    for (auto& t : ts)
      t.join();
    tl1_result total;
    for (auto& r : results) {
      total.sent += r.sent;
      total.received += r.received;
      total.sessions += r.sessions;
    }
    return total;
  };
  run(40'000, 1);
  auto base = rss.now();
  auto t0 = clock_type::now();
  auto total = run(commands, 100);
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::this_thread::sleep_for(2s);
  auto after = rss.now();
  std::printf("tl1: %llu mutated commands from %d clients (%llu sessions) in %.1f s (%.0f/s), "
              "%.1f MiB of replies; ocs-emu RSS %.1f MiB after warm-up, peak %.1f, %.1f after: "
              "%+.1f%%\n",
              (unsigned long long)total.sent, clients, (unsigned long long)total.sessions, secs,
              double(total.sent) / secs, total.received / 1048576.0, base / 1024.0,
              rss.peak() / 1024.0, after / 1024.0, 100.0 * double(after - base) / double(base));
  emu.send_signal(SIGTERM);
  emu.wait(lt::live_limit);
}

} // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::setenv("LOOM_BIN", loom::bench::loom_binary().c_str(), 0);
  ::setenv("LOOM_SOURCE_ROOT", LOOM_SOURCE_ROOT, 0);
  uint64_t n = argc > 1 ? std::stoull(argv[1]) : 1'000'000;
  gateway_part(n);
  tl1_part(n);
  return 0;
}
