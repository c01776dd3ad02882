// Admissions at the speed of the disk: a real `loom serve` (synced writes, CURVE on) and C
// concurrent admin clients each submitting K jobs one after another (every submission waits
// for its durable answer). Reports admissions per second beside their floor (C threads
// writing admission-sized synced batches into a bare RocksDB, its group commit sharing the
// syncs), the WAL syncs the service made (loom_store_syncs_total, when the binary has it)
// and the service's CPU per admission; then
// the same load against a `serve` with [ha] on a 3-member etcd cluster on loopback (every
// decision committed to etcd, fenced, before it is answered), side by side, with the ratio.
//
//   bench_admission [CLIENTS [JOBS_PER_CLIENT [ROUNDS]]]  default: 1 and 16 clients, 200 jobs
//                                                         each, 3 rounds beside the floor
//   LOOM_BIN=/path/to/other/loom bench_admission 16    the same load against another build
//
// The cluster is large enough that every job is placed (no rejection shortcuts).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
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
#include "tests/support/etcd_cluster.hpp"
#include "tests/support/process.hpp"

namespace lt = loom::test;
using loom::bench::clock_type;

namespace {

/// [ha] on the cluster's etcd endpoints, or nothing without HA.
std::string ha_text(const std::vector<std::string>& etcd) {
  if (etcd.empty())
    return {};
  return fmt::format("[ha]\nendpoints = [\"{}\"]\nname = \"bench\"\n",
                     fmt::join(etcd, "\", \""));
}

std::string config_text(int port, int metrics_port, const std::string& db, int nodes,
                        const std::vector<std::string>& etcd) {
  return ha_text(etcd) + fmt::format(R"([service]
name = "bench-admission"
log_level = "warn"  # the bench does not read the log while it runs: keep it small
[endpoints]
gateway = "tcp://127.0.0.1:{}"
metrics = "127.0.0.1:{}"
[storage]
path = "{}"
sync_writes = true
)",
                                     port, metrics_port, db)
         + loom::bench::cluster_text(nodes);
}

/// The value of a counter on the service's /metrics, or -1 if it has none.
double metric(int port, const std::string& name) {
  std::string text;
  try {
    text = lt::http_get(port, "/metrics");
  } catch (const std::exception&) {
    return -1; // not listening yet
  }
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+]+)")))
    return -1;
  return std::stod(m[1]);
}

/// Admissions per second of `clients` x `per_client` submissions; 0 after a failure.
double run(int clients, int per_client, const std::vector<std::string>& etcd = {}) {
  lt::temp_dir dir;
  const int port = lt::free_tcp_port();
  const int nodes = clients * per_client; // a new group each, at worst
  const int metrics_port = lt::free_tcp_port();
  lt::write_file(dir / "loom.toml", config_text(port, metrics_port, dir / "db", nodes, etcd));
  lt::child_process serve{{loom::bench::loom_binary(), "serve", "-c", dir / "loom.toml"}};
  // Ready once /metrics answers and the keys are written (the gateway binds right after;
  // ZeroMQ connects whenever it does).
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {
    ready = metric(metrics_port, "loom_store_batches_total") >= 0
            && !loom::read_key(dir / "db/keys/admin.pub").empty()
            && (etcd.empty() || metric(metrics_port, "loom_ha_leader") == 1);
    if (!ready)
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  if (!ready) {
    std::fprintf(stderr, "serve did not start:\n%s\n", serve.stderr_text().c_str());
    return 0;
  }
  loom::client_options o;
  o.endpoint = fmt::format("tcp://127.0.0.1:{}", port);
  o.server_public_key = loom::read_key(dir / "db/keys/server.pub");
  o.public_key = loom::read_key(dir / "db/keys/admin.pub");
  o.secret_key = loom::read_key(dir / "db/keys/admin.secret");
  o.timeout = std::chrono::seconds{5};
  const double syncs0 = metric(metrics_port, "loom_store_syncs_total");
  const double cpu0 = loom::bench::cpu_seconds(serve.pid());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  auto t0 = clock_type::now();
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      loom::client admin{o};
      for (int k = 0; k < per_client; ++k) {
        loom::v1::Envelope e;
        e.mutable_submit_job()->set_spec_toml(loom::bench::admitted_job(fmt::format("j{}-{}", c, k)));
        auto r = admin.call(e);
        if (!r || !r->has_submit_reply() || r->submit_reply().group().empty())
          ++failures;
      }
    });
  for (auto& t : threads)
    t.join();
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  const double cpu = loom::bench::cpu_seconds(serve.pid()) - cpu0;
  const double syncs = syncs0 < 0 ? -1 : metric(metrics_port, "loom_store_syncs_total") - syncs0;
  const double commits = metric(metrics_port, "loom_ha_commit_seconds_count");
  const double commit_s = metric(metrics_port, "loom_ha_commit_seconds_sum");
  const int n = clients * per_client;
  std::printf("admissions on %s, %d client(s) x %d jobs, synced: %.0f/s (%.3f s), service CPU "
              "%.0f us per admission, WAL syncs %s%s\n",
              etcd.empty() ? "RocksDB" : "etcd ([ha], 3 members)", clients, per_client, n / secs,
              secs, cpu / n * 1e6,
              syncs < 0 ? "n/a (no loom_store_syncs_total)" : fmt::format("{:.0f} ({:.2f} per admission)", syncs, syncs / n).c_str(),
              failures ? fmt::format(", {} FAILED", failures.load()).c_str() : "");
  if (!etcd.empty() && commits > 0)
    std::printf("  etcd: %.0f group commits (%.1f admissions each), %.2f ms each\n", commits,
                n / commits, commit_s / commits * 1e3);
  if (failures) {
    serve.read_until(true, [](const std::string&) { return false; }, std::chrono::seconds{1});
    auto lines = serve.stderr_lines();
    for (size_t i = lines.size() > 20 ? lines.size() - 20 : 0; i < lines.size(); ++i)
      std::fprintf(stderr, "serve: %s\n", lines[i].c_str());
  }
  serve.send_signal(SIGTERM);
  serve.wait(std::chrono::seconds{30});
  return failures ? 0 : n / secs;
}

/// The floor: `clients` threads each writing `per_client` synced batches the size of an
/// admission's (its job, placement, group and event records, about 310 bytes) into a bare
/// RocksDB, whose group commit shares a WAL sync among the writers waiting; batches per second.
double group_commit_floor(int clients, int per_client) {
  lt::temp_dir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::Open(options, dir / "db", &raw).ok())
    return 0;
  std::unique_ptr<rocksdb::DB> db{raw};
  rocksdb::WriteOptions synced;
  synced.sync = true;
  std::atomic<int> failures{0};
  auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      for (int k = 0; k < per_client; ++k) {
        const auto id = fmt::format("j{}-{}", c, k);
        rocksdb::WriteBatch b;
        b.Put("jobs/" + id, std::string(150, 'j'));
        b.Put("placements/" + id, std::string(60, 'p'));
        b.Put("groups/" + id, std::string(60, 'g'));
        b.Put("events/" + id, std::string(40, 'e'));
        if (!db->Write(synced, &b).ok())
          ++failures;
      }
    });
  for (auto& t : threads)
    t.join();
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  const int n = clients * per_client;
  std::printf("floor, %d writer(s) x %d admission-sized synced batches into a bare RocksDB: "
              "%.0f/s\n",
              clients, per_client, n / secs);
  return failures ? 0 : n / secs;
}

/// RocksDB beside its group-commit floor (`rounds` times), then etcd, for the same load.
int side_by_side(int clients, int per_client, int rounds) {
  std::vector<double> of_floor;
  double local = 0;
  for (int r = 0; r < rounds; ++r) {
    const double floor = group_commit_floor(clients, per_client);
    local = run(clients, per_client);
    if (floor <= 0 || local <= 0)
      return 1;
    of_floor.push_back(local / floor);
  }
  std::printf("admissions, %d client(s): RocksDB admissions / the group-commit floor, min / "
              "median / max of %d rounds: %s (goal: >= 0.5)\n",
              clients, rounds, loom::bench::spread(of_floor, "{:.2f}").c_str());
  lt::etcd_cluster etcd{3};
  const double replicated = run(clients, per_client, etcd.urls());
  if (local > 0 && replicated > 0)
    std::printf("admissions, %d client(s): etcd/RocksDB %.2f\n", clients, replicated / local);
  return local > 0 && replicated > 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  const int per_client = argc > 2 ? std::atoi(argv[2]) : 200;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  if (argc > 1)
    return side_by_side(std::atoi(argv[1]), per_client, rounds);
  return side_by_side(1, per_client, rounds) + side_by_side(16, per_client, rounds);
}
