#include "types/cluster.hpp"

namespace loom {

const gpu_spec* cluster::find_gpu(std::string_view name) const {
  for (const auto& g : gpus)
    if (g.name == name)
      return &g;
  return nullptr;
}

const node* cluster::find_node(std::string_view id) const {
  for (const auto* pool : {&rollout, &training})
    for (const auto& n : *pool)
      if (n.id == id)
        return &n;
  return nullptr;
}

int cluster::total_gpus(pool_kind pool) const {
  int total = 0;
  for (const auto& n : pool == pool_kind::rollout ? rollout : training)
    total += n.gpus;
  return total;
}

double cluster::cost_per_hour(pool_kind pool) const {
  double total = 0;
  for (const auto& n : pool == pool_kind::rollout ? rollout : training)
    if (const auto* g = find_gpu(n.gpu))
      total += g->cost_per_gpu_hour * n.gpus;
  return total;
}

} // namespace loom
