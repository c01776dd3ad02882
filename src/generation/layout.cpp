#include "generation/layout.hpp"

#include <algorithm>
#include <limits>

namespace loom {

namespace {

/// Up to `count` instances of `config` on the GPUs `left` on each engine, numbered from `first_id`.
std::vector<instance_slot> place_group(const parallel_config& config, int count,
                                       const std::vector<engine_slot>& engines,
                                       std::vector<int>& left, uint32_t first_id) {
  std::vector<instance_slot> out;
  const int g = config.gpus();
  std::vector<std::string> spanning;
  int gathered = 0;
  for (size_t e = 0; e < engines.size() && int(out.size()) < count; ++e) {
    if (g <= engines[e].gpus) {
      for (; left[e] >= g && int(out.size()) < count; left[e] -= g)
        out.push_back({first_id + uint32_t(out.size()), {engines[e].engine}, config});
      continue;
    }
    if (left[e] != engines[e].gpus || left[e] <= 0)
      continue; // a wide instance takes whole engines
    spanning.push_back(engines[e].engine);
    gathered += left[e];
    left[e] = 0;
    if (gathered >= g) {
      out.push_back({first_id + uint32_t(out.size()), std::move(spanning), config});
      spanning.clear();
      gathered = 0;
    }
  }
  return out;
}

} // namespace

std::vector<instance_slot> lay_out(const parallel_config& config,
                                   const std::vector<engine_slot>& engines, uint32_t first_id) {
  std::vector<int> left;
  for (auto& e : engines)
    left.push_back(std::max(0, e.gpus));
  return place_group(config, std::numeric_limits<int>::max(), engines, left, first_id);
}

std::vector<instance_slot> lay_out(const gen_deployment& d,
                                   const std::vector<engine_slot>& engines) {
  std::vector<int> left;
  for (auto& e : engines)
    left.push_back(std::max(0, e.gpus));
  const bool latency_first = d.mixed() && d.latency.gpus() > d.parallel.gpus();
  std::vector<instance_slot> base;
  std::vector<instance_slot> latency;
  if (latency_first)
    latency = place_group(d.latency, d.latency_instances, engines, left, 0);
  base = place_group(d.parallel, d.instances, engines, left, 0);
  if (d.mixed() && !latency_first)
    latency = place_group(d.latency, d.latency_instances, engines, left, 0);
  for (auto& s : latency)
    s.instance += uint32_t(base.size());
  base.insert(base.end(), latency.begin(), latency.end());
  return base;
}

std::vector<uint32_t> led_by(const std::vector<instance_slot>& slots, const std::string& engine) {
  std::vector<uint32_t> out;
  for (auto& s : slots)
    if (!s.engines.empty() && s.engines.front() == engine)
      out.push_back(s.instance);
  return out;
}

std::vector<instance_slot> carried_by(const std::vector<instance_slot>& slots,
                                      const std::string& engine) {
  std::vector<instance_slot> out;
  for (auto& s : slots)
    if (std::find(s.engines.begin(), s.engines.end(), engine) != s.engines.end())
      out.push_back(s);
  return out;
}

} // namespace loom
