// Config loading and validation at production scale: the WEAVE testbed (82 nodes) and a
// generated RFabric cluster of 4096 nodes in 64 PoDs x 8 rails with 4096 ToR-OCS links.

#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/config.hpp"

namespace {

std::string large_rfabric(int pods, int servers_per_pod, int rails) {
  int half = servers_per_pod / 2;
  std::string t = R"(
[endpoints]
gateway = "tcp://127.0.0.1:5555"
metrics = "127.0.0.1:0"
[storage]
path = "var/bench"
[cluster]
name = "large"
cross_link_gbps = 400
)";
  t += fmt::format("[[cluster.rollout]]\nid = \"r{{0..{}}}\"\ngpu = \"H20\"\ngpus = 8\n"
                   "host_memory_gb = 2048\n",
                   pods * half - 1);
  t += fmt::format("[[cluster.training]]\nid = \"t{{0..{}}}\"\ngpu = \"H800\"\ngpus = 8\n"
                   "host_memory_gb = 2048\n",
                   pods * half - 1);
  t += fmt::format("[fabric]\nkind = \"rfabric\"\nlink_gbps = 400\nnics_per_server = {}\n", rails);
  for (int p = 0; p < pods; ++p)
    t += fmt::format("[[fabric.pods]]\nid = \"p{}\"\nservers = [\"r{{{}..{}}}\", \"t{{{}..{}}}\"]\n",
                     p, p * half, p * half + half - 1, p * half, p * half + half - 1);
  for (int p = 0; p < pods; ++p)
    for (int r = 0; r < rails; ++r)
      t += fmt::format("[[fabric.tors]]\nid = \"tor-p{}-r{}\"\npod = \"p{}\"\nrail = {}\n"
                       "ports = 128\n",
                       p, r, p, r);
  for (int p = 0; p < pods; ++p)
    t += fmt::format("[[fabric.ocs]]\nid = \"agg-p{}\"\ntier = \"agg\"\npod = \"p{}\"\n"
                     "ports = 576\ntechnology = \"piezo\"\n",
                     p, p);
  for (int p = 0; p < pods; ++p)
    for (int r = 0; r < rails; ++r)
      t += fmt::format("[[fabric.links]]\nfrom = \"tor-p{}-r{}:{{65..72}}\"\n"
                       "to = \"agg-p{}:{{{}..{}}}\"\n",
                       p, r, p, r * 8 + 1, r * 8 + 8);
  return t;
}

void BM_parse_weave_testbed(benchmark::State& state) {
  std::ifstream in{LOOM_SOURCE_ROOT "/conf/weave-testbed.toml"};
  std::stringstream text;
  text << in.rdbuf();
  auto s = text.str();
  for (auto _ : state) {
    auto r = loom::parse_config(s, "weave-testbed.toml");
    if (!r.value)
      state.SkipWithError(r.errors.front().to_string().c_str());
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_parse_weave_testbed)->Unit(benchmark::kMicrosecond);

void BM_parse_large_rfabric(benchmark::State& state) {
  auto s = large_rfabric(static_cast<int>(state.range(0)), 64, 8);
  size_t links = 0;
  for (auto _ : state) {
    auto r = loom::parse_config(s, "large.toml");
    if (!r.value) {
      state.SkipWithError(r.errors.front().to_string().c_str());
      break;
    }
    links = r.value->fabric.links.size();
  }
  state.counters["nodes"] = static_cast<double>(state.range(0) * 64);
  state.counters["links"] = static_cast<double>(links);
}
BENCHMARK(BM_parse_large_rfabric)->Arg(8)->Arg(64)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
