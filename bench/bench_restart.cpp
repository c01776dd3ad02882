// Restart at cluster scale (#49): a `loom serve` whose store holds JOBS admitted jobs is
// restarted and timed until it is ready (it says so once its scheduler has restored every job
// and answered; a job listing through the gateway is then answered too), beside
// the floor: one scan of the same RocksDB store (every column family, every value read) in
// this process, and beside the same cluster restarted on an empty store (what no restore can
// save). Also the restarted service's peak RSS against its RSS once settled and against the
// filled service's, and the CPU it uses while idle. Rounds alternate on the same, warm, store.
//
//   bench_restart [JOBS [ROUNDS]]     default: 100000 jobs, 3 rounds
//   LOOM_BENCH_STORE=DIR              fill DIR's store once and reuse it on later runs
//   LOOM_BIN=/path/to/other/loom      restart another build's serve on the same store

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <rocksdb/db.h>

#include "bench/support.hpp"
#include "loom.pb.h"
#include "loom/client.hpp"
#include "tests/support/process.hpp"

namespace fs = std::filesystem;
namespace lt = loom::test;
using loom::bench::clock_type;
using loom::bench::spread;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Every job in its own pair of nodes at worst, so that no admission is refused for room.
std::string config_text(const fs::path& dir, int port, int jobs) {
  return fmt::format(R"([service]
name = "bench-restart"
log_level = "info"
[endpoints]
gateway = "tcp://127.0.0.1:{}"
metrics = "127.0.0.1:{}"
[storage]
path = "{}"
sync_writes = false  # the fill only; a restart reads what is there either way
)",
                     port, lt::free_tcp_port(), (dir / "db").string())
         + loom::bench::cluster_text(jobs);
}

/// A field of /proc/PID/status in kB (VmRSS, VmHWM), or -1.
double status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0)
      return std::stod(line.substr(field.size() + 1));
  return -1;
}

loom::client_options admin_options(const fs::path& dir, int port) {
  loom::client_options o;
  o.endpoint = fmt::format("tcp://127.0.0.1:{}", port);
  o.server_public_key = loom::read_key(dir / "db/keys/server.pub");
  o.public_key = loom::read_key(dir / "db/keys/admin.pub");
  o.secret_key = loom::read_key(dir / "db/keys/admin.secret");
  o.timeout = std::chrono::seconds{600}; // a restart at this scale may take minutes
  return o;
}

/// The wall-clock time a log line's `ts=2026-12-07T18:36:25.413856+00:00` names.
std::chrono::system_clock::time_point stamped(const std::string& line) {
  std::tm t{};
  long us = 0;
  auto at = line.find("ts=");
  if (at == std::string::npos
      || std::sscanf(line.c_str() + at + 3, "%d-%d-%dT%d:%d:%d.%ld", &t.tm_year, &t.tm_mon,
                     &t.tm_mday, &t.tm_hour, &t.tm_min, &t.tm_sec, &us) != 7)
    return {};
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&t)) + std::chrono::microseconds{us};
}

/// A running serve on the bench's store, with its gateway port.
struct service {
  int port = lt::free_tcp_port();
  std::chrono::system_clock::time_point spawned;
  std::unique_ptr<lt::child_process> process;

  service(const fs::path& dir, int jobs) {
    lt::write_file(dir / "loom.toml", config_text(dir, port, jobs));
    spawned = std::chrono::system_clock::now();
    process = std::make_unique<lt::child_process>(
      std::vector<std::string>{loom::bench::loom_binary(), "serve", "-c", dir / "loom.toml"});
  }
  /// Seconds from the spawn until the service logged itself ready (its scheduler has restored
  /// every job and answered), by the log's own time stamp: a client's first answer comes
  /// later by ZeroMQ's reconnect backoff (100 ms doubling), not by the service. -1 if never.
  double ready_after() {
    auto line = process->read_until(
      true, [](const std::string& l) { return l.find("event=serve_ready") != std::string::npos; },
      std::chrono::seconds{600});
    return line ? std::chrono::duration<double>(stamped(*line) - spawned).count() : -1;
  }
  ~service() {
    process->send_signal(SIGTERM);
    process->wait(std::chrono::seconds{120});
  }
};

/// The service's first page of jobs: true once the scheduler has answered it.
bool list_jobs(loom::client& admin) {
  loom::v1::Envelope e;
  e.mutable_list_jobs()->set_limit(1);
  auto r = admin.call(e);
  return r && r->has_job_list();
}

/// Fills the store with `jobs` admissions from 16 clients; the filling service's RSS (MB) once
/// it holds them all, the steady state a restart replaces; 0 after a failure.
double fill(const fs::path& dir, int jobs) {
  service s{dir, jobs};
  if (s.ready_after() < 0)
    return 0;
  const int clients = 16;
  std::atomic<int> failures{0};
  std::atomic<int> next{0};
  auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      loom::client admin{admin_options(dir, s.port)};
      for (int k = next++; k < jobs; k = next++) {
        loom::v1::Envelope e;
        e.mutable_submit_job()->set_spec_toml(loom::bench::admitted_job(fmt::format("j{:06}", k)));
        auto r = admin.call(e);
        if (!r || !r->has_submit_reply() || r->submit_reply().group().empty())
          ++failures;
      }
    });
  for (auto& t : threads)
    t.join();
  std::this_thread::sleep_for(std::chrono::seconds{5});
  const double rss_mb = status_kb(s.process->pid(), "VmRSS") / 1024;
  std::printf("filled: %d jobs admitted in %.1f s (%d failed), the service then held %.0f MB\n",
              jobs, seconds_since(t0), failures.load(), rss_mb);
  return failures ? 0 : rss_mb;
}

/// The floor: every key and value of every column family, read once; seconds.
double scan_store(const fs::path& db) {
  auto t0 = clock_type::now();
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies({}, db.string(), &names).ok())
    return -1;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (auto& n : names)
    families.emplace_back(n, rocksdb::ColumnFamilyOptions{});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::OpenForReadOnly({}, db.string(), families, &handles, &raw).ok())
    return -1;
  size_t bytes = 0;
  for (auto* h : handles) {
    std::unique_ptr<rocksdb::Iterator> it{raw->NewIterator({}, h)};
    for (it->SeekToFirst(); it->Valid(); it->Next())
      bytes += it->key().size() + it->value().size();
    raw->DestroyColumnFamilyHandle(h);
  }
  delete raw;
  const double s = seconds_since(t0);
  std::printf("  scan: %.3f s, %.1f MB in %zu column families\n", s, bytes / 1e6, names.size());
  return s;
}

struct restart_figures {
  double ready_s = -1, peak_mb = 0, steady_mb = 0, idle_core = 0;
};

/// Seconds until the service on `dir` is ready, once a client's job listing is answered too;
/// -1 if either never happens.
double until_ready(service& s, const fs::path& dir) {
  const double ready = s.ready_after();
  loom::client admin{admin_options(dir, s.port)};
  return ready >= 0 && list_jobs(admin) ? ready : -1;
}

/// One restart: until ready (and a listing answered), then settled and idle.
restart_figures restart(const fs::path& dir, int jobs) {
  restart_figures f;
  service s{dir, jobs};
  f.ready_s = until_ready(s, dir);
  if (f.ready_s < 0)
    return f;
  std::this_thread::sleep_for(std::chrono::seconds{5}); // what restore left behind settles
  const auto pid = s.process->pid();
  const double cpu0 = loom::bench::cpu_seconds(pid);
  std::this_thread::sleep_for(std::chrono::seconds{10});
  f.idle_core = (loom::bench::cpu_seconds(pid) - cpu0) / 10;
  f.peak_mb = status_kb(pid, "VmHWM") / 1024;
  f.steady_mb = status_kb(pid, "VmRSS") / 1024;
  std::printf("  restart: ready after %.3f s, peak RSS %.0f MB, settled %.0f MB, idle %.2f%% of "
              "a core\n",
              f.ready_s, f.peak_mb, f.steady_mb, f.idle_core * 100);
  return f;
}

/// What a restart costs with no job at all: the same cluster on an empty store (process, config,
/// store, actors); the part of a restart no restore can save.
double empty_restart(const fs::path& dir, int jobs) {
  service s{dir, jobs};
  const double ready = until_ready(s, dir);
  std::printf("  the same cluster on an empty store: ready after %.3f s\n", ready);
  return ready;
}

} // namespace

int main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  std::unique_ptr<lt::temp_dir> temp;
  fs::path dir;
  if (auto* keep = std::getenv("LOOM_BENCH_STORE")) {
    dir = keep;
    fs::create_directories(dir);
  } else {
    temp = std::make_unique<lt::temp_dir>();
    dir = temp->path();
  }
  const auto marker = dir / fmt::format("filled-{}", jobs); // holds the filled service's RSS
  if (!fs::exists(marker)) {
    fs::remove_all(dir / "db");
    const double rss_mb = fill(dir, jobs);
    if (rss_mb <= 0)
      return 1;
    lt::write_file(marker, fmt::format("{}", rss_mb));
  }
  double filled_mb = 0;
  std::ifstream{marker} >> filled_mb;
  lt::temp_dir empty;
  {
    service first{empty.path(), jobs}; // creates the empty store and its keys
    if (first.ready_after() < 0)
      return 1;
  }
  std::vector<double> ratio, ready, scans, fixed, mem, mem_filled, idle;
  for (int r = 0; r < rounds; ++r) {
    std::printf("round %d\n", r + 1);
    const double floor = scan_store(dir / "db");
    auto f = restart(dir, jobs);
    const double none = empty_restart(empty.path(), jobs);
    if (floor <= 0 || f.ready_s < 0 || none < 0) {
      std::fprintf(stderr, "round %d failed\n", r + 1);
      return 1;
    }
    ratio.push_back(f.ready_s / floor);
    ready.push_back(f.ready_s);
    scans.push_back(floor);
    fixed.push_back(none / floor);
    mem.push_back(f.peak_mb / f.steady_mb);
    mem_filled.push_back(f.peak_mb / filled_mb);
    idle.push_back(f.idle_core * 100);
  }
  std::printf("restart with %d jobs, min / median / max of %d rounds:\n", jobs, rounds);
  std::printf("  until ready (every job restored, the scheduler answering): %s; one scan of the "
              "store: %s\n",
              spread(ready, "{:.3f} s").c_str(),
              spread(scans, "{:.3f} s").c_str());
  std::printf("  restart / scan: %s (target <= 3x); with no job at all / scan: %s\n",
              spread(ratio, "{:.1f}x").c_str(),
              spread(fixed, "{:.1f}x").c_str());
  std::printf("  peak RSS / settled RSS: %s; peak RSS / the filled service's RSS (%.0f MB): %s "
              "(target <= 1.5x)\n",
              spread(mem, "{:.2f}x").c_str(), filled_mb,
              spread(mem_filled, "{:.2f}x").c_str());
  std::printf("  idle CPU: %s of a core (target < 1%%)\n",
              spread(idle, "{:.2f}%").c_str());
  return 0;
}
