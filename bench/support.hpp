#pragma once
// What the benchmarks that start real `loom` processes share.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

namespace loom::bench {

using clock_type = std::chrono::steady_clock;

/// The `loom` binary: LOOM_BIN when meson runs the benchmark, else the build's own.
inline std::string loom_binary() {
  auto* b = std::getenv("LOOM_BIN");
  return b ? b : LOOM_BUILD_ROOT "/loom";
}

/// A cluster of `nodes` rollout and `nodes` training nodes of 8 GPUs each (a config's
/// [cluster] tables): room for every job of admitted_job() in a group of its own.
inline std::string cluster_text(int nodes) {
  return fmt::format(R"([cluster]
name = "bench"
cross_link_gbps = 20.0
[[cluster.rollout]]
id = "r-{{0..{}}}"
gpu = "H20"
gpus = 8
host_memory_gb = 2048
[[cluster.training]]
id = "t-{{0..{}}}"
gpu = "H800"
gpus = 8
host_memory_gb = 2048
)",
                     nodes - 1, nodes - 1);
}

/// A job spec Algorithm 1 places (two of them share a group), named `name`.
inline std::string admitted_job(const std::string& name) {
  return fmt::format(R"(name = "{}"
model = "Qwen2.5-7B"
rollout_gpus = 8
training_gpus = 8
rollout_host_memory_gb = 100
training_host_memory_gb = 100
worst_rollout_s = 100
worst_training_s = 50
model_gb = 15
)",
                     name);
}

/// "min / median / max" of a bench's rounds, each as `one` formats it (e.g. "{:.2f}x").
inline std::string spread(std::vector<double> v, const char* one) {
  std::sort(v.begin(), v.end());
  auto f = [&](double x) { return fmt::format(fmt::runtime(one), x); };
  return v.empty() ? "-" : f(v.front()) + " / " + f(v[v.size() / 2]) + " / " + f(v.back());
}

/// user + system CPU seconds of a process so far.
inline double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(all.substr(all.rfind(')') + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i)
    if (i == 14 || i == 15)
      ticks += std::stod(f);
  return ticks / double(sysconf(_SC_CLK_TCK));
}

} // namespace loom::bench
