#include "tests/support/etcd_cluster.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "ha/etcd.hpp"

namespace loom::test {

etcd_cluster::etcd_cluster(int size, std::vector<std::string> extra) {
  std::vector<std::string> peers, initial;
  for (int i = 0; i < size; ++i) {
    urls_.push_back(fmt::format("http://127.0.0.1:{}", free_tcp_port()));
    peers.push_back(fmt::format("http://127.0.0.1:{}", free_tcp_port()));
    initial.push_back(fmt::format("m{}={}", i, peers.back()));
  }
  for (int i = 0; i < size; ++i) {
    std::vector<std::string> argv{
      "/usr/bin/etcd", "--name", fmt::format("m{}", i), "--data-dir",
      dir_ / fmt::format("m{}", i), "--listen-client-urls", urls_[i],
      "--advertise-client-urls", urls_[i], "--listen-peer-urls", peers[i],
      "--initial-advertise-peer-urls", peers[i], "--initial-cluster",
      fmt::format("{}", fmt::join(initial, ",")), "--log-level", "warn", "--logger", "zap"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    members_.push_back(std::make_unique<child_process>(argv));
  }
  const auto deadline = std::chrono::steady_clock::now() + scaled(std::chrono::seconds{30});
  for (auto& url : urls_) {
    etcd_client probe{{{url}, {}, 500}};
    while (!probe.range("/probe")) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("etcd did not start: " + members_.front()->stderr_text());
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
  }
}

etcd_cluster::~etcd_cluster() = default; // members killed first, then their data removed

} // namespace loom::test
