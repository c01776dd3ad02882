#include "scheduler/meta_iteration.hpp"

#include <algorithm>

namespace loom {

double cycle_time(const std::vector<planned_phases>& members) {
  double t = 0;
  for (auto& m : members)
    t = std::max(t, m.solo_s());
  return t;
}

double load_time(const std::vector<planned_phases>& members) {
  double train = 0;
  // A group spans a handful of rollout nodes: a flat list beats a hash map (admission calls
  // this for every candidate group).
  std::vector<std::pair<int, double>> per_node;
  per_node.reserve(8);
  for (auto& m : members) {
    train += m.training_s;
    for (int n : m.rollout_nodes) {
      auto it = std::find_if(per_node.begin(), per_node.end(),
                             [n](const auto& p) { return p.first == n; });
      if (it == per_node.end())
        per_node.emplace_back(n, m.rollout_s);
      else
        it->second += m.rollout_s;
    }
  }
  double roll = 0;
  for (auto& [n, t] : per_node)
    roll = std::max(roll, t);
  return std::max(train, roll);
}

bool saturated(const std::vector<planned_phases>& members) {
  return load_time(members) >= cycle_time(members);
}

namespace {

/// Iteration end times (end of sync) of each member per round of a round-robin list
/// schedule: every node and the training pool serve the round's phases in member order. The
/// last member takes part from round `join_round` on; the others from round 0.
std::vector<std::vector<double>> round_robin_ends(const std::vector<planned_phases>& members,
                                                  size_t join_round, size_t rounds) {
  const size_t n = members.size();
  // Dense node slots: a group spans a handful of nodes, so a linear scan beats hashing.
  std::vector<int> node_ids;
  std::vector<std::vector<size_t>> slots(n);
  for (size_t j = 0; j < n; ++j)
    for (int node : members[j].rollout_nodes) {
      auto it = std::find(node_ids.begin(), node_ids.end(), node);
      slots[j].push_back(size_t(it - node_ids.begin()));
      if (it == node_ids.end())
        node_ids.push_back(node);
    }
  std::vector<double> node_free(node_ids.size(), 0.0);
  double training_free = 0;
  std::vector<double> ready(n, 0.0), roll_end(n, 0.0);
  std::vector<std::vector<double>> ends(n);
  for (auto& e : ends)
    e.reserve(rounds);
  for (size_t c = 0; c < rounds; ++c) {
    const size_t active = c >= join_round ? n : n - 1;
    double first_start = -1;
    for (size_t j = 0; j < active; ++j) {
      // The executor admits the joiner at any moment before anyone starts its round: plan
      // for the latest, when the first of them starts.
      if (c == join_round && j + 1 == n && first_start >= 0)
        ready[j] = std::max(ready[j], first_start);
      double start = ready[j];
      for (size_t slot : slots[j])
        start = std::max(start, node_free[slot]);
      if (first_start < 0 || start < first_start)
        first_start = start;
      roll_end[j] = start + members[j].rollout_s;
      for (size_t slot : slots[j])
        node_free[slot] = roll_end[j];
    }
    for (size_t j = 0; j < active; ++j) {
      double start = std::max(roll_end[j], training_free);
      training_free = start + members[j].training_s;
      ready[j] = training_free + members[j].sync_s;
      ends[j].push_back(ready[j]);
    }
  }
  return ends;
}

} // namespace

std::vector<double> meta_iteration_times(const std::vector<planned_phases>& members) {
  const size_t n = members.size();
  std::vector<double> out(n, 0.0);
  if (n == 0)
    return out;
  // Enough rounds for the list schedule to become periodic; average over the last n.
  const size_t rounds = 2 * n + 4;
  auto ends = round_robin_ends(members, 0, rounds);
  for (size_t j = 0; j < n; ++j)
    out[j] = (ends[j][rounds - 1] - ends[j][rounds - 1 - n]) / double(n);
  return out;
}

namespace {

/// iteration_bounds() for member j: one list-scheduled round from j's iteration end, in the
/// turn order rotated to end at j.
double iteration_bound(const std::vector<planned_phases>& members, size_t j) {
  const size_t n = members.size();
  std::vector<std::pair<int, double>> node_free; // node -> free at
  node_free.reserve(2 * n);
  auto free_at = [&](int node) -> double& {
    for (auto& [id, t] : node_free)
      if (id == node)
        return t;
    return node_free.emplace_back(node, 0.0).second;
  };
  double training_free = 0;
  double end = 0;
  for (size_t step = 1; step <= n; ++step) {
    const size_t i = (j + step) % n;
    const auto& m = members[i];
    // Every other member may still be syncing; j has just ended its iteration.
    double start = i == j ? 0.0 : m.sync_s;
    for (int node : m.rollout_nodes)
      start = std::max(start, free_at(node));
    const double rolled = start + m.rollout_s;
    for (int node : m.rollout_nodes)
      free_at(node) = rolled;
    training_free = std::max(rolled, training_free) + m.training_s;
    end = training_free + m.sync_s;
  }
  return end;
}

} // namespace

std::vector<double> iteration_bounds(const std::vector<planned_phases>& members) {
  std::vector<double> out(members.size(), 0.0);
  for (size_t j = 0; j < members.size(); ++j)
    out[j] = iteration_bound(members, j);
  return out;
}

std::vector<double> longest_iterations_after_join(const std::vector<planned_phases>& members) {
  const size_t n = members.size();
  std::vector<double> out(n, 0.0);
  if (n == 0)
    return out;
  // The others settle into their regime first; then the transition and the new regime.
  const size_t join_round = 2 * n + 2;
  const size_t rounds = join_round + 2 * n + 4;
  auto ends = round_robin_ends(members, join_round, rounds);
  for (size_t j = 0; j < n; ++j) {
    const auto& e = ends[j];
    const size_t first = j + 1 < n ? join_round : 1; // the iteration the joiner's entry hits
    for (size_t c = first; c < e.size(); ++c)
      out[j] = std::max(out[j], e[c] - e[c - 1]);
  }
  return out;
}

} // namespace loom
