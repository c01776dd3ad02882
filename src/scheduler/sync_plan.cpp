#include "scheduler/sync_plan.hpp"

#include <algorithm>
#include <tuple>

#include "fabric/broadcast.hpp"

namespace loom {

namespace {

/// The first worker of each node, in node order.
std::vector<const sync_peer*> node_heads(const std::vector<sync_peer>& receivers) {
  std::vector<const sync_peer*> heads;
  for (auto& p : receivers)
    if (heads.empty() || heads.back()->node != p.node)
      heads.push_back(&p);
  return heads;
}

} // namespace

std::vector<sync_hop> sync_route(const sync_peer& source, std::vector<sync_peer> receivers,
                                 const pod_map& pods) {
  std::vector<sync_hop> out;
  if (source.address.empty())
    return out;
  std::erase_if(receivers, [](const sync_peer& p) { return p.address.empty(); });
  std::sort(receivers.begin(), receivers.end(), [](const sync_peer& a, const sync_peer& b) {
    return std::tie(a.node, a.worker) < std::tie(b.node, b.worker);
  });
  auto heads = node_heads(receivers);
  uint32_t outside = 0; // the PoD of rollout nodes in none; the trainer's is the next one
  for (auto& [node, pod] : pods)
    outside = std::max(outside, pod + 1);
  auto pod_of = [&](const std::string& node, uint32_t otherwise) {
    auto it = pods.find(node);
    return it == pods.end() ? otherwise : it->second;
  };
  // App. E's forest with one seed per PoD and binary trees (broadcast_params' defaults); the
  // PoD budgets only pace its waves, which the route does not need.
  std::vector<endpoint_ref> refs;
  for (uint32_t i = 0; i < heads.size(); ++i)
    refs.push_back({i + 1, pod_of(heads[i]->node, outside)});
  broadcast_params params;
  params.pod_budget.assign(outside + 2, 1);
  auto plan = plan_broadcast({{0, pod_of(source.node, outside + 1)}}, refs, params);
  std::vector<std::string> parent(heads.size());
  for (auto& [child, from] : plan.parent)
    parent[child - 1] = from == 0 ? source.address : heads[from - 1]->address;
  for (size_t i = 0; i < heads.size(); ++i)
    out.push_back({heads[i]->worker, heads[i]->address, parent[i]});
  size_t h = 0;
  for (auto& p : receivers) {
    while (heads[h]->node != p.node)
      ++h;
    if (heads[h] != &p)
      out.push_back({p.worker, p.address, heads[h]->address});
  }
  return out;
}

} // namespace loom
