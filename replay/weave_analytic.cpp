#include "replay/weave_analytic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "replay/cover_bound.hpp"
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

namespace {

/// A record after which weave's run hosts the job in no group, until it is placed again.
constexpr bool leaves_group(cluster_event e) {
  return e == cluster_event::left || e == cluster_event::drifted || e == cluster_event::moved;
}

/// The jobs weave's run hosts after each of its cluster records: `at(t, jobs, record)` is
/// called once per record; a false return stops the walk (and walk_active returns false).
template <class At>
bool walk_active(const weave_scenario& sc, const std::vector<cluster_record>& weave_run, At&& at) {
  auto specs = planned_jobs(sc);
  std::map<std::string, rl_job> active;
  for (auto& r : weave_run) {
    if (leaves_group(r.event))
      active.erase(r.job);
    else if (r.event != cluster_event::rejected)
      active[r.job] = specs.at(r.job);
    std::vector<rl_job> jobs;
    for (auto& [id, j] : active)
      jobs.push_back(j);
    if (!at(seconds_of(r.time_ns), jobs, r))
      return false;
  }
  return true;
}

offline_optimum optimum_of(const weave_scenario& sc) {
  const auto& c = sc.config.cluster;
  auto node_of = [&](const node& n) {
    const gpu_spec* g = c.find_gpu(n.gpu);
    return pool_node{n.id, n.gpus, n.host_memory_gb, n.gpus * (g ? g->cost_per_gpu_hour : 0)};
  };
  return offline_optimum{node_of(c.rollout.front()), node_of(c.training.front()),
                         sc.config.policy.weave, sc.migrate_tails};
}

const char* const no_grouping = "some active set has no feasible grouping";

} // namespace

ordered_json run_optimal(const weave_scenario& sc, const std::vector<cluster_record>& weave_run,
                         double start, double end) {
  auto opt = optimum_of(sc);
  std::vector<std::pair<double, double>> cost, arrivals_cost;
  arrivals_only frozen{opt};
  std::set<std::string> placed_again; // left only to be placed again by weave
  size_t most = 0;
  std::string error;
  walk_active(sc, weave_run, [&](double t, const std::vector<rl_job>& jobs,
                                 const cluster_record& r) {
    const bool leaves = leaves_group(r.event);
    if (r.event == cluster_event::left)
      frozen.leave(r.job);
    else if (leaves)
      placed_again.insert(r.job);
    most = std::max(most, jobs.size());
    if (most > offline_optimum::max_jobs) {
      error = fmt::format("{} concurrent jobs: brute force stops at {}", most,
                          offline_optimum::max_jobs);
      return false;
    }
    auto best = opt.cost_per_hour(jobs);
    if (!best) {
      error = no_grouping;
      return false;
    }
    cost.emplace_back(t, *best);
    // A real arrival regroups everything; a job weave moved or re-placed keeps its group here.
    if (is_placement(r.event) && !placed_again.erase(r.job) && !frozen.regroup(jobs)) {
      error = no_grouping;
      return false;
    }
    if (!leaves || r.event == cluster_event::left)
      arrivals_cost.emplace_back(t, frozen.cost_per_hour());
    return true;
  });
  if (!error.empty())
    return ordered_json{{"error", error}};
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

ordered_json run_bound(const weave_scenario& sc, const std::vector<cluster_record>& weave_run,
                       double start, double end) {
  auto opt = optimum_of(sc);
  cover_bound bound{opt};
  std::vector<std::pair<double, double>> cost;
  size_t most = 0;
  bool solved = walk_active(sc, weave_run, [&](double t, const std::vector<rl_job>& jobs,
                                               const cluster_record&) {
    most = std::max(most, jobs.size());
    auto floor = bound.cost_per_hour(jobs);
    if (floor)
      cost.emplace_back(t, *floor);
    return floor.has_value();
  });
  if (!solved)
    return ordered_json{{"error", no_grouping}};
  auto s = integrate(cost, start, end);
  ordered_json out;
  out["cost_per_hour_avg"] = round4(s.average);
  out["cost_per_hour_peak"] = round4(s.peak);
  out["cost_total"] = round4(s.integral / 3600);
  out["slo_attainment"] = 1.0; // every column's group meets its members' SLOs
  out["max_concurrent_jobs"] = int64_t(most);
  out["columns"] = int64_t(bound.columns());
  out["pricing_rounds"] = bound.rounds();
  out["groups_visited"] = bound.visited();
  out["groups_priced"] = bound.priced();
  out["groups_costed"] = int64_t(opt.groups_costed());
  out["note"] = "LP relaxation of the offline optimum's set cover over the active job sets of "
                "the weave run, by column generation (every group of up to max_group_size jobs "
                "priced exactly): no grouping, regrouping free at every change, costs less";
  return out;
}

} // namespace loom::replay
