#include "scheduler/placement.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace loom {

double training_memory_per_node(const rl_job& job, int group_training_gpus) {
  if (group_training_gpus <= 0 || group_training_gpus >= job.training_gpus)
    return job.training_memory_gb;
  return job.training_memory_gb * job.training_gpus / group_training_gpus;
}

double rollout_load(const co_execution_group& g, int node) {
  double t = 0;
  for (auto& m : g.plan)
    if (std::find(m.rollout_nodes.begin(), m.rollout_nodes.end(), node) != m.rollout_nodes.end())
      t += m.rollout_s;
  return t;
}

placement_engine::placement_engine(std::vector<pool_node> rollout_pool,
                                   std::vector<pool_node> training_pool,
                                   const weave_policy& policy, bool migrate_tails)
  : rollout_pool_(std::move(rollout_pool)),
    training_pool_(std::move(training_pool)),
    rollout_used_(rollout_pool_.size(), false),
    training_used_(training_pool_.size(), false),
    rollout_failed_(rollout_pool_.size(), false),
    training_failed_(training_pool_.size(), false),
    policy_(policy),
    tail_migration_cost_s_(migrate_tails ? policy.tail_migration_cost_s : 0.0) {
  for (int i = 0; i < int(rollout_pool_.size()); ++i)
    rollout_free_.insert(rollout_free_.end(), i);
  for (int i = 0; i < int(training_pool_.size()); ++i)
    training_free_.insert(training_free_.end(), i);
  for (auto& n : rollout_pool_) {
    rollout_gpus_total_ += n.gpus;
    rollout_memory_max_ = std::max(rollout_memory_max_, n.memory_gb);
  }
  for (auto& n : training_pool_) {
    training_gpus_total_ += n.gpus;
    training_memory_max_ = std::max(training_memory_max_, n.memory_gb);
  }
}

void placement_engine::update_open(uint64_t id) {
  auto it = groups_.find(id);
  // A profiling pass runs solo (WEAVE §5 (1)): nothing joins its group.
  auto profiling = [](const group_member& m) { return m.job.profile; };
  if (it != groups_.end() && !it->second.is_saturated
      && int(it->second.members.size()) < policy_.max_group_size
      && std::none_of(it->second.members.begin(), it->second.members.end(), profiling))
    open_.insert(id);
  else
    open_.erase(id);
}

std::vector<int> placement_engine::free_nodes(const std::vector<pool_node>& pool,
                                              const std::set<int>& free, int gpus) const {
  std::vector<int> out;
  int have = 0;
  for (auto it = free.begin(); it != free.end() && have < gpus; ++it) {
    out.push_back(*it);
    have += pool[size_t(*it)].gpus;
  }
  if (have < gpus)
    out.clear();
  return out;
}

std::vector<int> placement_engine::free_rollout_nodes(int gpus) const {
  return free_nodes(rollout_pool_, rollout_free_, gpus);
}

std::vector<int> placement_engine::free_training_nodes(int gpus) const {
  return free_nodes(training_pool_, training_free_, gpus);
}

size_t placement_engine::rollout_nodes_needed(const rl_job& job) const {
  const int node_gpus = gpus_per_node(rollout_pool_);
  return size_t((job.rollout_gpus + node_gpus - 1) / node_gpus);
}

double placement_engine::training_memory_used(const co_execution_group& g) const {
  double used = 0;
  for (auto& m : g.members)
    used += training_memory_per_node(m.job, g.training_gpus);
  return used;
}

double placement_engine::rollout_memory_used(const co_execution_group& g, int node) const {
  double used = 0;
  for (auto& m : g.members)
    for (int n : m.rollout_nodes)
      if (n == node)
        used += m.job.rollout_memory_gb;
  return used;
}

bool placement_engine::has_room(const co_execution_group& g, const rl_job& job) const {
  if (int(g.members.size()) >= policy_.max_group_size)
    return false;
  const double used = training_memory_used(g);
  const double need = training_memory_per_node(job, g.training_gpus);
  for (int n : g.training_nodes)
    if (need >= training_pool_[size_t(n)].memory_gb - used)
      return false;
  return true;
}

bool placement_engine::rollout_fits(const co_execution_group& g, const rl_job& job,
                                    int node) const {
  return job.rollout_memory_gb < rollout_pool_[size_t(node)].memory_gb
                                   - rollout_memory_used(g, node);
}

planned_phases plan_member(const rl_job& job, std::vector<int> rollout_nodes,
                           int group_training_gpus, const std::optional<phase_switches>& shared,
                           double tail_migration_cost_s) {
  // DP matched to the group's training pool: the same work over more or fewer GPUs.
  const double scale =
    group_training_gpus > 0 ? double(job.training_gpus) / group_training_gpus : 1.0;
  planned_phases out{std::move(rollout_nodes), job.rollout_s, job.training_s * scale, job.sync_s};
  if (shared) {
    out.rollout_s += shared->rollout.warm_s + tail_migration_cost_s;
    out.training_s += shared->training.warm_s;
  }
  return out;
}

planned_phases placement_engine::member_for(const rl_job& job, const std::vector<int>& nodes,
                                          int group_training_gpus) const {
  return plan_member(job, nodes, group_training_gpus,
                     member_switches(job, gpus_per_node(rollout_pool_),
                                     gpus_per_node(training_pool_), group_training_gpus, policy_),
                     tail_migration_cost_s_);
}

std::set<std::vector<int>> placement_engine::packings(const co_execution_group& g,
                                                      size_t nodes) const {
  std::set<std::vector<int>> out;
  auto healthy = [&](const std::vector<int>& set) {
    return std::none_of(set.begin(), set.end(), [&](int n) { return rollout_failed_[size_t(n)]; });
  };
  for (auto& m : g.members)
    if (m.rollout_nodes.size() == nodes && healthy(m.rollout_nodes))
      out.insert(m.rollout_nodes);
  std::vector<std::pair<double, int>> load;
  for (int n : g.rollout_nodes)
    if (!rollout_failed_[size_t(n)])
      load.emplace_back(rollout_load(g, n), n);
  if (load.size() >= nodes) {
    std::sort(load.begin(), load.end());
    std::vector<int> least;
    for (size_t i = 0; i < nodes; ++i)
      least.push_back(load[i].second);
    std::sort(least.begin(), least.end());
    out.insert(least);
  }
  return out;
}

bool placement_engine::meets_slos(const co_execution_group& g, const rl_job& job,
                                  const std::vector<int>& nodes) const {
  auto& plan = candidate_plan_;
  plan.assign(g.plan.begin(), g.plan.end());
  plan.push_back(member_for(job, nodes, g.training_gpus));
  auto meets = [&](size_t k, double iteration_s) { // on the profiled worst-case solo time
    const auto& who = k < g.members.size() ? g.members[k].job : job;
    return within_slo(iteration_s, who.slo, who.solo_s());
  };
  // No iteration beats the longest member's solo time or the bottleneck's load (§4.2): a
  // cheap bound prunes most hopeless candidates before the simulation.
  const double floor_s = std::max(cycle_time(plan), load_time(plan));
  for (size_t k = 0; k < plan.size(); ++k)
    if (!meets(k, floor_s))
      return false;
  // Any single iteration under any realization: the cheaper check, so it goes first.
  if (policy_.admission_bound == slo_bound::any_realization) {
    auto bounds = iteration_bounds(plan);
    for (size_t k = 0; k < plan.size(); ++k)
      if (!meets(k, bounds[k]))
        return false;
  }
  // The join and the new regime at the worst case, iteration by iteration.
  auto times = longest_iterations_after_join(plan);
  for (size_t k = 0; k < plan.size(); ++k)
    if (!meets(k, times[k]))
      return false;
  return true;
}

placement_decision placement_engine::place(const rl_job& job) const {
  placement_decision best;
  if (job.rollout_gpus <= 0 || job.training_gpus <= 0
      || (!job.profile && (job.rollout_s <= 0 || job.training_s < 0)) || job.slo < 1.0) {
    best.reason = "invalid job: needs rollout and training GPUs, a rollout time and an SLO >= 1";
    return best;
  }
  if (auto why = never_fits(job); !why.empty()) {
    best.reason = std::move(why);
    return best;
  }
  if (job.profile) // WEAVE §5 (1): its phases are unknown until it ran once alone
    return isolated(job);
  best.delta_cost_per_hour = std::numeric_limits<double>::infinity();
  const size_t nodes_needed = rollout_nodes_needed(job);
  const auto fresh_rollout = free_rollout_nodes(job.rollout_gpus);
  double fresh_cost = 0;
  for (int n : fresh_rollout)
    fresh_cost += rollout_pool_[size_t(n)].cost_per_hour;
  for (uint64_t id : open_) { // not saturated, not full (Alg. 1 line 4)
    const auto& g = groups_.at(id);
    if (!has_room(g, job))
      continue; // Alg. 1 line 8
    if (std::any_of(g.training_nodes.begin(), g.training_nodes.end(),
                    [&](int n) { return training_failed_[size_t(n)]; }))
      continue; // its jobs are leaving: it trains on a failed node
    auto consider = [&](const std::vector<int>& nodes, placement_kind kind, double delta) {
      if (delta >= best.delta_cost_per_hour)
        return;
      for (int n : nodes)
        if (!rollout_fits(g, job, n))
          return;
      if (!meets_slos(g, job, nodes))
        return;
      best.kind = kind;
      best.group = g.id;
      best.rollout_nodes = nodes;
      best.new_rollout_nodes = kind == placement_kind::rollout_scaling ? nodes : std::vector<int>{};
      best.new_training_nodes.clear();
      best.delta_cost_per_hour = delta;
    };
    for (auto& nodes : packings(g, nodes_needed))
      consider(nodes, placement_kind::direct_packing, 0.0);
    if (!fresh_rollout.empty())
      consider(fresh_rollout, placement_kind::rollout_scaling, fresh_cost);
  }
  // Alg. 1 lines 15-17: an isolated group of its own.
  auto alone = isolated(job);
  if (alone.kind == placement_kind::new_group && alone.delta_cost_per_hour < best.delta_cost_per_hour)
    return alone;
  if (best.kind == placement_kind::rejected)
    return alone; // carries the reason
  return best;
}

std::string placement_engine::never_fits(const rl_job& job) const {
  if (job.rollout_gpus > rollout_gpus_total_)
    return fmt::format("needs {} rollout GPUs; the cluster has {}", job.rollout_gpus,
                       rollout_gpus_total_);
  if (job.training_gpus > training_gpus_total_)
    return fmt::format("needs {} training GPUs; the cluster has {}", job.training_gpus,
                       training_gpus_total_);
  if (job.rollout_memory_gb >= rollout_memory_max_)
    return fmt::format("needs {:.1f} GB of host memory per rollout node; the largest has {:.1f}",
                       job.rollout_memory_gb, rollout_memory_max_);
  if (job.training_memory_gb >= training_memory_max_)
    return fmt::format("needs {:.1f} GB of host memory per training node; the largest has {:.1f}",
                       job.training_memory_gb, training_memory_max_);
  return {};
}

placement_decision placement_engine::isolated(const rl_job& job) const {
  placement_decision d;
  auto roll = free_rollout_nodes(job.rollout_gpus);
  auto train = free_training_nodes(job.training_gpus);
  bool fits = true;
  for (int n : roll)
    fits &= job.rollout_memory_gb < rollout_pool_[size_t(n)].memory_gb;
  for (int n : train)
    fits &= job.training_memory_gb < training_pool_[size_t(n)].memory_gb;
  if (!fits) {
    d.reason = "its working set does not fit a node's host memory";
    return d;
  }
  if (roll.empty() || train.empty()) {
    d.reason = fmt::format("no group has slack for it and the free nodes cannot host it alone "
                           "(needs {} rollout and {} training GPUs)",
                           job.rollout_gpus, job.training_gpus);
    return d;
  }
  d.kind = placement_kind::new_group;
  d.group = next_group_;
  d.rollout_nodes = roll;
  d.new_rollout_nodes = roll;
  d.new_training_nodes = train;
  for (int n : roll)
    d.delta_cost_per_hour += rollout_pool_[size_t(n)].cost_per_hour;
  for (int n : train)
    d.delta_cost_per_hour += training_pool_[size_t(n)].cost_per_hour;
  return d;
}

double placement_engine::group_cost_per_hour(uint64_t id) const {
  auto it = groups_.find(id);
  if (it == groups_.end())
    return 0;
  double cost = 0;
  for (int n : it->second.rollout_nodes)
    cost += rollout_pool_[size_t(n)].cost_per_hour;
  for (int n : it->second.training_nodes)
    cost += training_pool_[size_t(n)].cost_per_hour;
  return cost;
}

void placement_engine::set_rollout_used(int n, bool used) {
  if (rollout_used_[size_t(n)] == used)
    return;
  rollout_used_[size_t(n)] = used;
  if (used)
    rollout_free_.erase(n);
  else if (!rollout_failed_[size_t(n)])
    rollout_free_.insert(n);
  const auto& node = rollout_pool_[size_t(n)];
  cost_per_hour_ += used ? node.cost_per_hour : -node.cost_per_hour;
  rollout_gpus_used_ += used ? node.gpus : -node.gpus;
}

void placement_engine::set_training_used(int n, bool used) {
  if (training_used_[size_t(n)] == used)
    return;
  training_used_[size_t(n)] = used;
  if (used)
    training_free_.erase(n);
  else if (!training_failed_[size_t(n)])
    training_free_.insert(n);
  const auto& node = training_pool_[size_t(n)];
  cost_per_hour_ += used ? node.cost_per_hour : -node.cost_per_hour;
  training_gpus_used_ += used ? node.gpus : -node.gpus;
}

bool placement_engine::set_failed(bool rollout_pool, int node, bool failed) {
  auto& flags = rollout_pool ? rollout_failed_ : training_failed_;
  if (node < 0 || size_t(node) >= flags.size())
    return false;
  flags[size_t(node)] = failed;
  auto& free = rollout_pool ? rollout_free_ : training_free_;
  const bool used = (rollout_pool ? rollout_used_ : training_used_)[size_t(node)];
  if (failed)
    free.erase(node);
  else if (!used)
    free.insert(node);
  return true;
}

std::vector<std::string> placement_engine::jobs_on(bool rollout_pool, int node) const {
  std::vector<std::string> out;
  for (auto& [id, g] : groups_) {
    const bool trains_there = !rollout_pool && std::find(g.training_nodes.begin(),
                                                         g.training_nodes.end(), node)
                                                 != g.training_nodes.end();
    for (auto& m : g.members)
      if (trains_there
          || (rollout_pool && std::find(m.rollout_nodes.begin(), m.rollout_nodes.end(), node)
                                != m.rollout_nodes.end()))
        out.push_back(m.job.id);
  }
  return out;
}

void placement_engine::commit(const rl_job& job, const placement_decision& d) {
  if (d.kind == placement_kind::rejected)
    return;
  for (int n : d.new_rollout_nodes)
    set_rollout_used(n, true);
  for (int n : d.new_training_nodes)
    set_training_used(n, true);
  if (d.kind == placement_kind::new_group) {
    co_execution_group g;
    g.id = next_group_++;
    g.training_nodes = d.new_training_nodes;
    for (int n : g.training_nodes)
      g.training_gpus += training_pool_[size_t(n)].gpus;
    groups_.emplace(g.id, std::move(g));
  }
  auto& g = groups_.at(d.group);
  for (int n : d.new_rollout_nodes)
    g.rollout_nodes.push_back(n);
  g.members.push_back({job, d.rollout_nodes});
  g.plan.push_back(member_for(job, d.rollout_nodes, g.training_gpus));
  g.is_saturated = saturated(g.plan);
  job_group_[job.id] = g.id;
  update_open(g.id);
}

bool placement_engine::remove(const std::string& job_id) {
  auto it = job_group_.find(job_id);
  if (it == job_group_.end())
    return false;
  auto& g = groups_.at(it->second);
  for (size_t j = 0; j < g.members.size(); ++j)
    if (g.members[j].job.id == job_id) {
      g.members.erase(g.members.begin() + long(j));
      g.plan.erase(g.plan.begin() + long(j));
      break;
    }
  job_group_.erase(it);
  if (g.members.empty()) {
    for (int n : g.rollout_nodes)
      set_rollout_used(n, false);
    for (int n : g.training_nodes)
      set_training_used(n, false);
    open_.erase(g.id);
    groups_.erase(g.id);
    if (groups_.empty()) // no rounding left over from the running sum
      cost_per_hour_ = 0;
    return true;
  }
  // Rollout nodes no member is pinned to any more go back to the pool.
  std::erase_if(g.rollout_nodes, [&](int n) {
    for (auto& m : g.members)
      if (std::find(m.rollout_nodes.begin(), m.rollout_nodes.end(), n) != m.rollout_nodes.end())
        return false;
    set_rollout_used(n, false);
    return true;
  });
  g.is_saturated = saturated(g.plan);
  update_open(g.id);
  return true;
}

std::optional<double> placement_engine::cost_after_regrouping(uint64_t id) {
  auto it = groups_.find(id);
  if (it == groups_.end())
    return std::nullopt;
  const co_execution_group before = it->second;
  const uint64_t next_group = next_group_;
  const double cost = cost_per_hour_;
  for (auto& m : before.members)
    remove(m.job.id);
  std::vector<std::string> placed;
  for (auto& m : before.members) {
    auto d = place(m.job);
    if (d.kind == placement_kind::rejected)
      break;
    commit(m.job, d);
    placed.push_back(m.job.id);
  }
  std::optional<double> after;
  if (placed.size() == before.members.size())
    after = cost_per_hour_;
  for (auto j = placed.rbegin(); j != placed.rend(); ++j)
    remove(*j);
  // Cannot be refused: the trial released every node it took, and the members are nowhere.
  restore(id, before.rollout_nodes, before.training_nodes, before.members);
  next_group_ = next_group;
  cost_per_hour_ = cost; // the running sum exactly as it was, not re-added
  return after;
}

std::string placement_engine::restore(uint64_t id, const std::vector<int>& rollout_nodes,
                                      const std::vector<int>& training_nodes,
                                      const std::vector<group_member>& members) {
  auto valid = [](const std::vector<int>& nodes, const std::vector<bool>& used) {
    for (int n : nodes)
      if (n < 0 || size_t(n) >= used.size() || used[size_t(n)])
        return false;
    return true;
  };
  if (groups_.count(id) || !valid(rollout_nodes, rollout_used_)
      || !valid(training_nodes, training_used_) || members.empty())
    return fmt::format("group g{} names a node that is unknown or already in use, or no job", id);
  for (auto& m : members)
    if (job_group_.count(m.job.id))
      return fmt::format("job '{}' is in two groups", m.job.id);
  co_execution_group g;
  g.id = id;
  g.rollout_nodes = rollout_nodes;
  g.training_nodes = training_nodes;
  for (int n : rollout_nodes)
    set_rollout_used(n, true);
  for (int n : training_nodes) {
    set_training_used(n, true);
    g.training_gpus += training_pool_[size_t(n)].gpus;
  }
  for (auto& m : members) {
    g.members.push_back(m);
    g.plan.push_back(member_for(m.job, m.rollout_nodes, g.training_gpus));
    job_group_[m.job.id] = id;
  }
  g.is_saturated = saturated(g.plan);
  groups_.emplace(id, std::move(g));
  update_open(id);
  next_group_ = std::max(next_group_, id + 1);
  return {};
}

} // namespace loom
