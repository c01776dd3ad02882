#include "replay/baselines.hpp"

#include <algorithm>
#include <memory>
#include <random>

namespace loom::replay {

namespace {

/// Rollout nodes of `g` whose host memory can take the job, by placement's own checks; empty
/// if the group cannot host it at all (full, training memory).
std::vector<int> hosting_nodes(const placement_engine& e, const co_execution_group& g,
                               const rl_job& job) {
  if (!e.has_room(g, job))
    return {};
  std::vector<int> out;
  for (int n : g.rollout_nodes)
    if (e.rollout_fits(g, job, n))
      out.push_back(n);
  if (out.size() < e.rollout_nodes_needed(job))
    return {};
  return out;
}

placement_decision join(const co_execution_group& g, std::vector<int> nodes) {
  placement_decision d;
  d.kind = placement_kind::direct_packing;
  d.group = g.id;
  std::sort(nodes.begin(), nodes.end());
  d.rollout_nodes = std::move(nodes);
  return d;
}

} // namespace

placement_chooser solo_chooser() {
  return [](const placement_engine& e, const rl_job& job) { return e.isolated(job); };
}

placement_chooser random_chooser(uint64_t seed, bool slo_feasible) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng, slo_feasible](const placement_engine& e, const rl_job& job) {
    std::vector<std::pair<const co_execution_group*, std::vector<int>>> options;
    auto pick_nodes = [&](std::vector<int>& nodes) {
      std::shuffle(nodes.begin(), nodes.end(), *rng);
      nodes.resize(e.rollout_nodes_needed(job));
    };
    for (auto& [id, g] : e.groups()) {
      auto nodes = hosting_nodes(e, g, job);
      if (nodes.empty())
        continue;
      if (slo_feasible) { // only nodes it may take; the SLO-blind one draws after its pick
        pick_nodes(nodes);
        if (!e.meets_slos(g, job, nodes))
          continue;
      }
      options.emplace_back(&g, std::move(nodes));
    }
    auto alone = e.isolated(job);
    const size_t choices = options.size() + (alone.kind == placement_kind::new_group ? 1 : 0);
    if (choices == 0)
      return alone;
    size_t pick = std::uniform_int_distribution<size_t>{0, choices - 1}(*rng);
    if (pick == options.size())
      return alone;
    auto& [g, nodes] = options[pick];
    if (!slo_feasible)
      pick_nodes(nodes);
    return join(*g, nodes);
  };
}

placement_chooser greedy_chooser(bool slo_feasible) {
  return [slo_feasible](const placement_engine& e, const rl_job& job) {
    const co_execution_group* best = nullptr;
    std::vector<int> best_nodes;
    double best_idle = -1;
    for (auto& entry : e.groups()) {
      const auto& g = entry.second; // a plain reference: the sort below captures it
      auto nodes = hosting_nodes(e, g, job);
      if (nodes.empty())
        continue;
      // Idle share of the bottleneck over the group's natural cycle.
      double idle = 1 - load_time(g.plan) / cycle_time(g.plan);
      if (idle <= best_idle)
        continue;
      std::stable_sort(nodes.begin(), nodes.end(), [&](int a, int b) {
        return rollout_load(g, a) < rollout_load(g, b);
      });
      nodes.resize(e.rollout_nodes_needed(job));
      if (slo_feasible && !e.meets_slos(g, job, nodes))
        continue;
      best_idle = idle;
      best = &g;
      best_nodes = std::move(nodes);
    }
    if (!best)
      return e.isolated(job);
    return join(*best, best_nodes);
  };
}

} // namespace loom::replay
