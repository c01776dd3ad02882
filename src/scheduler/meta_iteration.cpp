#include "scheduler/meta_iteration.hpp"

#include <algorithm>
#include <unordered_map>

namespace loom {

double cycle_time(const std::vector<group_member>& members) {
  double t = 0;
  for (auto& m : members)
    t = std::max(t, m.solo_s());
  return t;
}

double load_time(const std::vector<group_member>& members) {
  double train = 0;
  std::unordered_map<int, double> per_node;
  for (auto& m : members) {
    train += m.training_s;
    for (int n : m.rollout_nodes)
      per_node[n] += m.rollout_s;
  }
  double roll = 0;
  for (auto& [n, t] : per_node)
    roll = std::max(roll, t);
  return std::max(train, roll);
}

bool saturated(const std::vector<group_member>& members) {
  return load_time(members) >= cycle_time(members);
}

std::vector<double> meta_iteration_times(const std::vector<group_member>& members) {
  const size_t n = members.size();
  std::vector<double> out(n, 0.0);
  if (n == 0)
    return out;
  // Enough cycles for the list schedule to become periodic; average over the last n.
  const size_t cycles = 2 * n + 4;
  std::unordered_map<int, double> node_free;
  double training_free = 0;
  std::vector<double> ready(n, 0.0);
  std::vector<std::vector<double>> starts(n);
  std::vector<double> roll_end(n, 0.0);
  for (size_t c = 0; c < cycles; ++c) {
    for (size_t j = 0; j < n; ++j) {
      double start = ready[j];
      for (int node : members[j].rollout_nodes)
        start = std::max(start, node_free[node]);
      roll_end[j] = start + members[j].rollout_s;
      for (int node : members[j].rollout_nodes)
        node_free[node] = roll_end[j];
      starts[j].push_back(start);
    }
    for (size_t j = 0; j < n; ++j) {
      double start = std::max(roll_end[j], training_free);
      training_free = start + members[j].training_s;
      ready[j] = training_free + members[j].sync_s;
    }
  }
  const size_t window = n;
  for (size_t j = 0; j < n; ++j)
    out[j] = (starts[j][cycles - 1] - starts[j][cycles - 1 - window]) / double(window);
  return out;
}

} // namespace loom
