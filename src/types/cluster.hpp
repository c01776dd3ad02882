#pragma once
// The cluster: a rollout pool and a training pool of GPU nodes joined by a cross-cluster link
// (WEAVE §2, §6 testbed).

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "types/gpu.hpp"
#include "types/names.hpp"

namespace loom {

enum class pool_kind { rollout, training };

template <>
struct enum_names<pool_kind> {
  static constexpr std::array<std::pair<pool_kind, std::string_view>, 2> table{{
    {pool_kind::rollout, "rollout"},
    {pool_kind::training, "training"},
  }};
};

struct node {
  std::string id;
  pool_kind pool = pool_kind::rollout;
  std::string gpu;      // key into cluster::gpus
  int gpus = 0;         // GPUs in this node
  double host_memory_gb = 0;
};

struct cluster {
  std::string name;
  double cross_link_gbps = 0; // bandwidth between the rollout and training pools
  std::vector<gpu_spec> gpus; // catalog in force: built-ins merged with config overrides
  std::vector<node> rollout;
  std::vector<node> training;

  const gpu_spec* find_gpu(std::string_view name) const;
  const node* find_node(std::string_view id) const;
  int total_gpus(pool_kind pool) const;
  /// $/hour of every GPU in a pool, the provisioning cost WEAVE §4.2 minimises.
  double cost_per_hour(pool_kind pool) const;
};

/// The GPUs of each node of a pool (the config's nodes or the scheduler's): its first node's,
/// as a pool's nodes are alike (WEAVE §2); 8 for a pool with none yet, so nothing that sizes
/// by it divides by zero.
template <class Node>
int gpus_per_node(const std::vector<Node>& pool) {
  return pool.empty() ? 8 : std::max(1, pool.front().gpus);
}

} // namespace loom
