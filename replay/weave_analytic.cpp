#include "replay/weave_analytic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "replay/offline_optimal.hpp"
#include "replay/report.hpp"
#include "replay/rollout_model.hpp"
#include "replay/weave_figures.hpp"
#include "scheduler/phase_costs.hpp"

namespace loom::replay {

namespace {

/// One job co-located on `gpus` training-pool GPUs from its arrival: its iterations (appended)
/// and the GPU seconds they keep busy; returns when it ends.
double colocate_job(const weave_scenario& sc, length_draws& draws, size_t i, int gpus,
                    double slow, std::vector<iteration_record>& iterations, double& busy) {
  const auto& a = sc.jobs[i];
  const auto& j = a.job;
  const auto& policy = sc.config.policy.weave;
  const int per_node = std::min(gpus, gpus_per_node(sc.config.cluster.training));
  const double swap = phase_switch_costs(j.rollout_memory_gb, per_node, policy).warm_s
                      + phase_switch_costs(j.training_memory_gb, per_node, policy).warm_s;
  const double reshard = j.model_gb * 8 / policy.intra_cluster_gbps;
  rl_job planned = j;
  derive_phase_costs(planned, sc.config.cluster, policy);
  double t = a.arrival_s;
  for (int64_t k = 0; k < j.iterations; ++k) {
    auto draw = realize(j.rollout_s, j.training_s, draws.get(i, uint64_t(k)), a.drift,
                        double(k) / double(j.iterations));
    const double work = draw.rollout_s * slow + draw.training_s * j.training_gpus / gpus;
    const double d = work + swap + reshard;
    busy += work * gpus;
    t += d;
    iterations.push_back({j.id, "", k, 0, d, draw.rollout_s + draw.training_s, planned.solo_s(),
                          j.slo});
  }
  return t;
}

} // namespace

ordered_json run_colocated(const weave_scenario& sc, length_draws& draws, double start) {
  const auto& c = sc.config.cluster;
  const auto& tnode = c.training.front();
  const gpu_spec* tgpu = c.find_gpu(tnode.gpu);
  const gpu_spec* rgpu = c.find_gpu(c.rollout.front().gpu);
  const double slow = rgpu && tgpu ? rgpu->hbm_tbps / tgpu->hbm_tbps : 1.0;
  const double gpu_cost = tgpu ? tgpu->cost_per_gpu_hour : 0;
  // Co-location needs training-grade GPUs for both phases: it is bounded by the training
  // pool, and a job that finds too few free there is rejected, as weave rejects one.
  const int capacity = c.total_gpus(pool_kind::training);
  std::vector<size_t> order(sc.jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return sc.jobs[x].arrival_s < sc.jobs[y].arrival_s;
  });
  std::multimap<double, int> running; // end -> GPUs
  std::vector<iteration_record> iterations;
  std::vector<cluster_record> cluster;
  double busy = 0, end = start;
  int in_use = 0;
  auto record = [&](double t, cluster_event e, const std::string& job) {
    cluster.push_back({int64_t(std::llround(t * 1e9)), e, job, in_use * gpu_cost, 0, in_use, 0});
    end = std::max(end, t);
  };
  auto release_until = [&](double t) {
    for (auto it = running.begin(); it != running.end() && it->first <= t;
         it = running.erase(it)) {
      in_use -= it->second;
      record(it->first, cluster_event::left, "");
    }
  };
  for (size_t i : order) {
    const auto& a = sc.jobs[i];
    const int gpus =
      ((std::max(a.job.rollout_gpus, a.job.training_gpus) + tnode.gpus - 1) / tnode.gpus)
      * tnode.gpus;
    release_until(a.arrival_s);
    if (in_use + gpus > capacity) {
      record(a.arrival_s, cluster_event::rejected, a.job.id);
      continue;
    }
    in_use += gpus;
    record(a.arrival_s, cluster_event::new_group, a.job.id);
    running.emplace(colocate_job(sc, draws, i, gpus, slow, iterations, busy), gpus);
  }
  release_until(std::numeric_limits<double>::infinity());
  auto out = summarize(cluster, iterations, 0, busy, sc.jobs.size(), start, end);
  out["capacity_gpus"] = capacity;
  out["note"] = fmt::format("analytic: every phase on dedicated training-pool GPUs, at most the "
                            "pool's {}; no failures or drift handling",
                            capacity);
  out["figures"] = weave_series(cluster, iterations, start);
  return out;
}

namespace {

/// Each workload job as admission plans it on this cluster.
std::map<std::string, rl_job> planned_jobs(const weave_scenario& sc) {
  std::map<std::string, rl_job> specs;
  for (auto& a : sc.jobs) {
    rl_job j = a.job;
    derive_phase_costs(j, sc.config.cluster, sc.config.policy.weave);
    specs[j.id] = j;
  }
  return specs;
}

} // namespace

namespace {

/// The optimum that regroups only when a job arrives: between arrivals each group keeps its
/// members, and a departure leaves its group to the cheapest hosting of those who stay.
class arrivals_only {
public:
  explicit arrivals_only(offline_optimum& opt) : opt_(opt) {}

  bool regroup(const std::vector<rl_job>& jobs) {
    auto g = opt_.grouping(jobs);
    if (!g)
      return false;
    groups_.clear();
    for (auto& ids : *g) {
      group next;
      for (auto& id : ids)
        next.members.push_back(*std::find_if(jobs.begin(), jobs.end(),
                                             [&](const rl_job& j) { return j.id == id; }));
      next.cost = opt_.group_cost_of(next.members).value_or(0);
      groups_.push_back(std::move(next));
    }
    return true;
  }

  /// The job's group keeps its nodes, or the cheaper hosting of those who stay if there is
  /// one (a smaller training pool may break an SLO the larger one kept).
  void leave(const std::string& job) {
    for (auto& g : groups_)
      if (std::erase_if(g.members, [&](const rl_job& j) { return j.id == job; }) > 0
          && !g.members.empty())
        g.cost = std::min(g.cost, opt_.group_cost_of(g.members).value_or(g.cost));
    std::erase_if(groups_, [](auto& g) { return g.members.empty(); });
  }

  double cost_per_hour() const {
    double total = 0;
    for (auto& g : groups_)
      total += g.cost;
    return total;
  }

private:
  struct group {
    std::vector<rl_job> members;
    double cost = 0;
  };
  offline_optimum& opt_;
  std::vector<group> groups_;
};

} // namespace

ordered_json run_optimal(const weave_scenario& sc, const std::vector<cluster_record>& weave_run,
                         double start, double end) {
  const auto& c = sc.config.cluster;
  auto node_of = [&](const node& n) {
    const gpu_spec* g = c.find_gpu(n.gpu);
    return pool_node{n.id, n.gpus, n.host_memory_gb, n.gpus * (g ? g->cost_per_gpu_hour : 0)};
  };
  offline_optimum opt{node_of(c.rollout.front()), node_of(c.training.front()),
                      sc.config.policy.weave, sc.migrate_tails};
  auto specs = planned_jobs(sc);
  std::map<std::string, rl_job> active;
  std::vector<std::pair<double, double>> cost, arrivals_cost;
  arrivals_only frozen{opt};
  std::set<std::string> placed_again; // left only to be placed again by weave
  size_t most = 0;
  for (auto& r : weave_run) {
    const double t = seconds_of(r.time_ns);
    const bool leaves = r.event == cluster_event::left || r.event == cluster_event::drifted
                        || r.event == cluster_event::moved;
    if (leaves) {
      active.erase(r.job);
      if (r.event == cluster_event::left)
        frozen.leave(r.job);
      else
        placed_again.insert(r.job);
    } else if (r.event != cluster_event::rejected) {
      active[r.job] = specs.at(r.job);
    }
    most = std::max(most, active.size());
    if (most > offline_optimum::max_jobs)
      return ordered_json{{"error", fmt::format("{} concurrent jobs: brute force stops at {}",
                                                most, offline_optimum::max_jobs)}};
    std::vector<rl_job> jobs;
    for (auto& [id, j] : active)
      jobs.push_back(j);
    auto best = opt.cost_per_hour(jobs);
    if (!best)
      return ordered_json{{"error", "some active set has no feasible grouping"}};
    cost.emplace_back(t, *best);
    // A real arrival regroups everything; a job weave moved or re-placed keeps its group here.
    if (is_placement(r.event) && !placed_again.erase(r.job) && !frozen.regroup(jobs))
      return ordered_json{{"error", "some active set has no feasible grouping"}};
    if (!leaves || r.event == cluster_event::left)
      arrivals_cost.emplace_back(t, frozen.cost_per_hour());
  }
  auto s = integrate(cost, start, end);
  auto a = integrate(arrivals_cost, start, end);
  ordered_json out;
  out["cost_per_hour_avg"] = round4(s.average);
  out["cost_per_hour_peak"] = round4(s.peak);
  out["cost_total"] = round4(s.integral / 3600);
  out["slo_attainment"] = 1.0;
  out["max_concurrent_jobs"] = int64_t(most);
  out["arrivals_only"] = {{"cost_per_hour_avg", round4(a.average)},
                          {"cost_per_hour_peak", round4(a.peak)}};
  out["note"] = "offline brute force over the active job sets of the weave run, regrouping "
                "free at every arrival and departure (arrivals_only: regrouping at arrivals, "
                "each group then kept as its jobs leave); SLOs hold by construction (planned, "
                "not executed)";
  return out;
}

} // namespace loom::replay
