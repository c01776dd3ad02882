#include "fabric/broadcast.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace loom {

double fanout_s(size_t roots, size_t receivers, const broadcast_params& p) {
  if (receivers == 0 || roots == 0)
    return 0;
  // Each root serves ceil(receivers / roots) endpoints along a k-ary tree; a node sends every
  // chunk to its k children over one NIC, and the pipeline fills once per level.
  double per_root = std::ceil(double(receivers) / double(roots));
  double k = std::max<uint32_t>(1, p.fanout);
  double depth = 0;
  for (double reached = 0, level = 1; reached < per_root; ++depth) {
    level *= k;
    reached += level;
  }
  double send = k * p.shard_bytes / p.intra_link_bytes_per_s;
  double fill = (depth - 1) * k * std::min(p.chunk_bytes, p.shard_bytes) / p.intra_link_bytes_per_s;
  return send + std::max(0.0, fill);
}

namespace {

/// First-fit into waves under the PoD budgets (one circuit per edge), then spare budget to
/// the wave's slowest edges; returns the summed wave times.
double schedule_waves(std::vector<broadcast_edge> edges, const broadcast_params& p,
                      broadcast_plan& plan) {
  auto budget = [&](uint32_t pod) {
    return pod < p.pod_budget.size() ? p.pod_budget[pod] : 0u;
  };
  std::vector<std::map<uint32_t, uint32_t>> used; // per wave: PoD -> circuits
  for (auto& e : edges) {
    if (budget(e.from.pod) == 0 || budget(e.to.pod) == 0) {
      plan.feasible = false;
      continue;
    }
    size_t w = 0;
    for (; w < plan.waves.size(); ++w)
      if (used[w][e.from.pod] < budget(e.from.pod) && used[w][e.to.pod] < budget(e.to.pod))
        break;
    if (w == plan.waves.size()) {
      plan.waves.emplace_back();
      used.emplace_back();
    }
    plan.waves[w].push_back(e);
    ++used[w][e.from.pod];
    ++used[w][e.to.pod];
  }
  double total = 0;
  for (size_t w = 0; w < plan.waves.size(); ++w) {
    auto& wave = plan.waves[w];
    // Bottleneck equalisation: each extra circuit goes to the slowest edge that can take one.
    for (;;) {
      broadcast_edge* slowest = nullptr;
      for (auto& e : wave)
        if (used[w][e.from.pod] < budget(e.from.pod) && used[w][e.to.pod] < budget(e.to.pod)
            && (!slowest || e.circuits < slowest->circuits))
          slowest = &e;
      if (!slowest)
        break;
      ++slowest->circuits;
      ++used[w][slowest->from.pod];
      ++used[w][slowest->to.pod];
    }
    uint32_t fewest = wave.front().circuits;
    for (auto& e : wave)
      fewest = std::min(fewest, e.circuits);
    total += p.shard_bytes / (fewest * p.core_link_bytes_per_s);
  }
  return total;
}

} // namespace

broadcast_plan plan_broadcast(const std::vector<endpoint_ref>& holders,
                              const std::vector<endpoint_ref>& receivers,
                              const broadcast_params& p) {
  broadcast_plan plan;
  if (holders.empty() || receivers.empty())
    return plan;
  std::map<uint32_t, std::vector<endpoint_ref>> by_pod;
  for (auto& r : receivers)
    by_pod[r.pod].push_back(r);
  std::map<uint32_t, std::vector<endpoint_ref>> holders_by_pod;
  for (auto& h : holders)
    holders_by_pod[h.pod].push_back(h);
  // Phase A: seeds in PoDs without a holder, each assigned to a root; roots rotate across the
  // holders' PoDs first so that no source PoD boundary carries all the seeding.
  std::vector<endpoint_ref> roots;
  for (size_t i = 0; roots.size() < holders.size(); ++i)
    for (auto& [pod, hs] : holders_by_pod)
      if (i < hs.size())
        roots.push_back(hs[i]);
  std::vector<broadcast_edge> edges;
  size_t next_root = 0;
  for (auto& [pod, rs] : by_pod) {
    if (holders_by_pod.count(pod))
      continue; // a local holder roots this PoD's trees
    for (uint32_t s = 0; s < p.seeds_per_pod && s < rs.size(); ++s) {
      auto root = roots[next_root++ % roots.size()];
      edges.push_back({root, rs[s], 1});
      plan.seeds.push_back(rs[s]);
      plan.parent.emplace_back(rs[s].id, root.id);
    }
  }
  plan.phase_a_s = schedule_waves(std::move(edges), p, plan);
  // Phase B: inside each PoD, the rest hang off its roots (seeds or local holders) in k-ary
  // trees, breadth first.
  for (auto& [pod, rs] : by_pod) {
    std::vector<uint32_t> tree_nodes;
    auto local = holders_by_pod.find(pod);
    if (local != holders_by_pod.end())
      for (auto& h : local->second)
        tree_nodes.push_back(h.id);
    for (auto& s : plan.seeds)
      if (s.pod == pod)
        tree_nodes.push_back(s.id);
    size_t roots_here = tree_nodes.size();
    std::vector<uint32_t> rest;
    for (auto& r : rs)
      if (std::none_of(plan.seeds.begin(), plan.seeds.end(),
                       [&](const endpoint_ref& s) { return s.id == r.id; }))
        rest.push_back(r.id);
    for (size_t i = 0; i < rest.size(); ++i) {
      // Node i of the forest hangs off node (i / k) of the nodes already placed.
      plan.parent.emplace_back(rest[i], tree_nodes[i / std::max<uint32_t>(1, p.fanout)]);
      tree_nodes.push_back(rest[i]);
    }
    plan.phase_b_s = std::max(plan.phase_b_s, fanout_s(roots_here, rest.size(), p));
  }
  return plan;
}

broadcast_plan plan_flat_broadcast(const std::vector<endpoint_ref>& holders,
                                   const std::vector<endpoint_ref>& receivers,
                                   const broadcast_params& p) {
  broadcast_plan plan;
  if (holders.empty())
    return plan;
  std::vector<broadcast_edge> edges;
  size_t next = 0;
  std::map<uint32_t, size_t> local_receivers;
  for (auto& r : receivers) {
    auto holder = holders[next++ % holders.size()];
    plan.parent.emplace_back(r.id, holder.id);
    if (holder.pod == r.pod) {
      ++local_receivers[holder.id];
      continue;
    }
    edges.push_back({holder, r, 1});
  }
  plan.phase_a_s = schedule_waves(std::move(edges), p, plan);
  // Same-PoD receivers are served directly by their holder, one after another over its NIC.
  for (auto& [holder, n] : local_receivers)
    plan.phase_b_s = std::max(plan.phase_b_s, double(n) * p.shard_bytes / p.intra_link_bytes_per_s);
  return plan;
}

double one_copy_then_broadcast_s(size_t receivers, double cross_link_bytes_per_s,
                                 const broadcast_params& p) {
  return p.shard_bytes / cross_link_bytes_per_s + fanout_s(1, receivers > 0 ? receivers - 1 : 0, p);
}

std::vector<rank_flow> forest_flows(const fabric_model& model, const fabric_intent& intent) {
  std::vector<rank_flow> out;
  if (intent.members.size() < 2)
    return out;
  auto ref = [&](uint32_t i) { return endpoint_ref{i, model.pod_of(intent.members[i])}; };
  std::vector<endpoint_ref> receivers;
  for (uint32_t i = 1; i < intent.members.size(); ++i)
    receivers.push_back(ref(i));
  broadcast_params p;
  p.shard_bytes = intent.bytes;
  p.core_link_bytes_per_s = p.intra_link_bytes_per_s = model.link_bytes_per_s;
  p.pod_budget.assign(model.pods.size(), 0);
  for (auto& l : model.boundaries)
    ++p.pod_budget[l.pod];
  auto plan = plan_broadcast({ref(0)}, receivers, p);
  for (auto& [child, parent] : plan.parent)
    out.push_back({intent.members[parent], intent.members[child], intent.bytes});
  return out;
}

std::vector<rank_flow> planned_flows(const fabric_model& model, const fabric_intent& intent) {
  bool forest = intent.stage == fabric_stage::weight_sync && intent.mix.size() == 1
                && intent.mix[0].kind == primitive::broadcast;
  return forest ? forest_flows(model, intent) : intent_flows(intent);
}

} // namespace loom
