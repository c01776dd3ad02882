#include "replay/offline_optimal.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "scheduler/meta_iteration.hpp"

namespace loom::replay {

namespace {

/// Steps a restricted growth string (a set partition: a[0] = 0, a[i] <= 1 + max a[<i]) to the
/// next one; false after the last.
bool next_partition(std::vector<int>& a) {
  for (size_t i = a.size(); i-- > 1;) {
    if (a[i] <= *std::max_element(a.begin(), a.begin() + long(i))) {
      ++a[i];
      std::fill(a.begin() + long(i) + 1, a.end(), 0);
      return true;
    }
  }
  return false;
}

} // namespace

offline_optimum::offline_optimum(pool_node rollout_node, pool_node training_node,
                                 const weave_policy& policy, bool migrate_tails)
  : rollout_node_(std::move(rollout_node)),
    training_node_(std::move(training_node)),
    policy_(policy),
    tail_migration_cost_s_(migrate_tails ? policy.tail_migration_cost_s : 0.0) {}

planned_phases offline_optimum::member_plan(const rl_job& job, std::vector<int> nodes,
                                            int group_training_gpus, bool shared) const {
  // Alone, a job switches nothing; shared, as Algorithm 1 plans it.
  std::optional<phase_switches> switches;
  if (shared)
    switches = member_switches(job, rollout_node_.gpus, training_node_.gpus, group_training_gpus,
                               policy_);
  return plan_member(job, std::move(nodes), group_training_gpus, switches,
                     tail_migration_cost_s_);
}

int offline_optimum::training_gpus_for(const rl_job& job) const {
  const int tgpus = std::max(1, training_node_.gpus);
  return (job.training_gpus + tgpus - 1) / tgpus * tgpus;
}

bool offline_optimum::trainings_fit_slos(const std::vector<const rl_job*>& jobs,
                                         int group_training_gpus) const {
  // The training pool serves every member's training once a round in turn order, so each
  // member's meta-iteration time (meta_iteration_times) is at least their sum, whatever the
  // rollout partition (WEAVE §4.2's T_load on the training pool).
  double training = 0;
  for (auto* j : jobs)
    training += member_plan(*j, {}, group_training_gpus, jobs.size() > 1).training_s;
  return std::all_of(jobs.begin(), jobs.end(),
                     [&](const rl_job* j) { return training <= slo_limit_s(*j); });
}

bool offline_optimum::rollouts_fit_slos(const std::vector<const rl_job*>& jobs,
                                        const std::vector<int>& bin,
                                        const std::vector<planned_phases>& members) const {
  // A bin's first node serves each of its members' rollouts once a round. Over the n rounds
  // meta_iteration_times averages, member j's rollouts start no earlier than its previous
  // iteration ends, and (n - 1) rounds of that node's work stand between the first start and
  // the last end: j's time is at least ((n - 1) * load + j's own phases) / n. A cheap test
  // that skips round-robin simulations bound to fail.
  const size_t n = jobs.size();
  if (n < 2)
    return true;
  std::vector<double> load(n, 0.0);
  for (size_t i = 0; i < n; ++i)
    load[size_t(bin[i])] += members[i].rollout_s;
  for (size_t i = 0; i < n; ++i) {
    const double least = ((double(n) - 1) * load[size_t(bin[i])] + members[i].solo_s()) / double(n);
    if (least > slo_limit_s(*jobs[i]))
      return false;
  }
  return true;
}

bool offline_optimum::partition_meets_slos(const std::vector<const rl_job*>& jobs,
                                           const std::vector<int>& bin,
                                           const std::vector<int>& first,
                                           int group_training_gpus) const {
  const int rgpus = std::max(1, rollout_node_.gpus);
  const size_t n = jobs.size();
  std::vector<planned_phases> members;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int> nodes;
    const int need = (jobs[i]->rollout_gpus + rgpus - 1) / rgpus;
    for (int k = 0; k < need; ++k)
      nodes.push_back(first[size_t(bin[i])] + k);
    members.push_back(member_plan(*jobs[i], std::move(nodes), group_training_gpus, n > 1));
  }
  if (!rollouts_fit_slos(jobs, bin, members))
    return false;
  // Regrouped from scratch, nobody joins a running group: the steady state, and under
  // any_realization every single iteration.
  auto times = meta_iteration_times(members);
  if (policy_.admission_bound == slo_bound::any_realization) {
    auto bounds = iteration_bounds(members);
    for (size_t i = 0; i < n; ++i)
      times[i] = std::max(times[i], bounds[i]);
  }
  for (size_t i = 0; i < n; ++i)
    if (times[i] > jobs[i]->slo * jobs[i]->solo_s() * (1 + 1e-12))
      return false;
  return true;
}

std::optional<double> offline_optimum::partition_cost(const std::vector<const rl_job*>& jobs,
                                                      const std::vector<int>& bin,
                                                      int training_nodes,
                                                      std::vector<int>& first) const {
  const int rgpus = std::max(1, rollout_node_.gpus);
  const int bins = jobs.empty() ? 0 : *std::max_element(bin.begin(), bin.end()) + 1;
  std::vector<int> bin_nodes(size_t(bins), 0);
  std::vector<double> bin_memory(size_t(bins), 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto b = size_t(bin[i]);
    bin_nodes[b] = std::max(bin_nodes[b], (jobs[i]->rollout_gpus + rgpus - 1) / rgpus);
    bin_memory[b] += jobs[i]->rollout_memory_gb;
  }
  for (double m : bin_memory)
    if (m >= rollout_node_.memory_gb)
      return std::nullopt;
  first.assign(size_t(bins), 0);
  int nodes = 0;
  for (int b = 0; b < bins; ++b) {
    first[size_t(b)] = nodes;
    nodes += bin_nodes[size_t(b)];
  }
  return nodes * rollout_node_.cost_per_hour + training_nodes * training_node_.cost_per_hour;
}

std::optional<double> offline_optimum::group_cost(const std::vector<const rl_job*>& jobs) {
  std::string key;
  for (auto* j : jobs)
    key += j->id + '\n';
  if (auto it = memo_.find(key); it != memo_.end())
    return it->second;
  const int tgpus = std::max(1, training_node_.gpus);
  int training_nodes = 0;
  double training_memory = 0;
  for (auto* j : jobs) {
    training_nodes = std::max(training_nodes, (j->training_gpus + tgpus - 1) / tgpus);
    training_memory += j->training_memory_gb;
  }
  std::optional<double> best;
  if (training_memory < training_node_.memory_gb
      && trainings_fit_slos(jobs, training_nodes * tgpus)) {
    // Every partition of the members into rollout-node sets, as restricted growth strings,
    // costed (cheap) and then SLO-checked (a round-robin simulation each) cheapest first: the
    // first that meets every SLO is the group's cost.
    struct candidate {
      double cost;
      std::vector<int> bin, first;
    };
    std::vector<candidate> candidates;
    std::vector<int> bin(jobs.size(), 0);
    std::vector<int> first;
    do {
      if (auto cost = partition_cost(jobs, bin, training_nodes, first))
        candidates.push_back({*cost, bin, first});
    } while (next_partition(bin));
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](auto& x, auto& y) { return x.cost < y.cost; });
    for (auto& c : candidates)
      if (partition_meets_slos(jobs, c.bin, c.first, training_nodes * tgpus)) {
        best = c.cost;
        break;
      }
  }
  memo_[key] = best;
  return best;
}

group_extent offline_optimum::extent_of(const rl_job& job) const {
  const int rgpus = std::max(1, rollout_node_.gpus);
  const int tgpus = std::max(1, training_node_.gpus);
  return {(job.rollout_gpus + rgpus - 1) / rgpus, (job.training_gpus + tgpus - 1) / tgpus,
          job.rollout_memory_gb, job.training_memory_gb};
}

double offline_optimum::group_cost_floor(const group_extent& e) const {
  // Every member's training state is cached on each training node: more fits no group.
  if (e.training_memory_gb >= training_node_.memory_gb)
    return std::numeric_limits<double>::infinity();
  int rollout_nodes = e.rollout_nodes;
  // Each rollout-node set holds under one node's memory, and has a node at least.
  if (rollout_node_.memory_gb > 0 && e.rollout_memory_gb > 0)
    rollout_nodes =
      std::max(rollout_nodes, int(std::floor(e.rollout_memory_gb / rollout_node_.memory_gb)) + 1);
  return rollout_nodes * rollout_node_.cost_per_hour
         + e.training_nodes * training_node_.cost_per_hour;
}

std::optional<double> offline_optimum::group_cost_of(const std::vector<rl_job>& jobs) {
  std::vector<const rl_job*> members;
  for (auto& j : jobs)
    members.push_back(&j);
  std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->id < b->id; });
  return group_cost(members);
}

std::optional<double> offline_optimum::cost_per_hour(const std::vector<rl_job>& jobs) {
  auto c = best_cover(jobs);
  if (!c)
    return std::nullopt;
  return c->cost;
}

std::optional<std::vector<std::vector<std::string>>>
offline_optimum::grouping(const std::vector<rl_job>& jobs) {
  auto c = best_cover(jobs);
  if (!c)
    return std::nullopt;
  std::vector<std::vector<std::string>> out;
  for (auto& g : c->groups) {
    out.emplace_back();
    for (auto* j : g)
      out.back().push_back(j->id);
  }
  return out;
}

std::optional<offline_optimum::cover> offline_optimum::best_cover(const std::vector<rl_job>& jobs) {
  const size_t n = jobs.size();
  if (n > max_jobs)
    return std::nullopt;
  if (n == 0)
    return cover{};
  std::vector<const rl_job*> sorted;
  for (auto& j : jobs)
    sorted.push_back(&j);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->id < b->id; });
  const uint32_t full = (1u << n) - 1;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> group(full + 1, inf);
  for (uint32_t mask = 1; mask <= full; ++mask) {
    if (std::popcount(mask) > policy_.max_group_size)
      continue;
    std::vector<const rl_job*> members;
    for (size_t i = 0; i < n; ++i)
      if (mask & (1u << i))
        members.push_back(sorted[i]);
    if (auto c = group_cost(members))
      group[mask] = *c;
  }
  std::vector<double> best(full + 1, inf);
  std::vector<uint32_t> choice(full + 1, 0);
  best[0] = 0;
  for (uint32_t mask = 1; mask <= full; ++mask) {
    const uint32_t low = mask & -mask;
    // Sub-masks holding the lowest job: each cover is counted once.
    for (uint32_t sub = mask; sub; sub = (sub - 1) & mask)
      if ((sub & low) && group[sub] < inf && group[sub] + best[mask ^ sub] < best[mask]) {
        best[mask] = group[sub] + best[mask ^ sub];
        choice[mask] = sub;
      }
  }
  if (best[full] == inf)
    return std::nullopt;
  cover out{best[full], {}};
  for (uint32_t mask = full; mask; mask ^= choice[mask]) {
    out.groups.emplace_back();
    for (size_t i = 0; i < n; ++i)
      if (choice[mask] & (1u << i))
        out.groups.back().push_back(sorted[i]);
  }
  return out;
}

} // namespace loom::replay
