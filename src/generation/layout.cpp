#include "generation/layout.hpp"

#include <algorithm>

namespace loom {

std::vector<instance_slot> lay_out(const parallel_config& config,
                                   const std::vector<engine_slot>& engines, uint32_t first_id) {
  std::vector<instance_slot> out;
  const int g = config.gpus();
  uint32_t next = first_id;
  std::vector<std::string> spanning; // whole engines gathered for one wide instance
  int gathered = 0;
  for (auto& e : engines) {
    if (e.gpus <= 0)
      continue;
    if (g <= e.gpus) {
      for (int used = 0; used + g <= e.gpus; used += g)
        out.push_back({next++, {e.engine}});
      continue;
    }
    spanning.push_back(e.engine);
    gathered += e.gpus;
    if (gathered >= g) {
      out.push_back({next++, std::move(spanning)});
      spanning.clear();
      gathered = 0;
    }
  }
  return out;
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
