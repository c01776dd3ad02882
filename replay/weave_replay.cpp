#include "replay/weave_replay.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "replay/baselines.hpp"
#include "replay/driver.hpp"
#include "replay/offline_optimal.hpp"
#include "replay/report.hpp"
#include "replay/sim_frameworks.hpp"
#include "scheduler/cluster_scheduler.hpp"
#include "scheduler/phase_costs.hpp"
#include "store/database.hpp"
#include "store/store_actor.hpp"

namespace loom::replay {

namespace {

using json = nlohmann::ordered_json;

/// What one policy's run left behind.
struct policy_log {
  std::vector<cluster_record> cluster;
  std::vector<iteration_record> iterations;
  sim_ledger ledger;
  std::vector<double> decision_us;
};

struct recorder_state {
  static inline const char* name = "recorder";
  std::shared_ptr<policy_log> log;
};

observer_actor::behavior_type recorder(observer_actor::stateful_pointer<recorder_state> self,
                                       std::shared_ptr<policy_log> log) {
  self->state.log = std::move(log);
  return {
    [self](cluster_atom, cluster_record& r) {
      if (r.event != "left" && r.event != "drifted")
        self->state.log->decision_us.push_back(r.decision_us);
      self->state.log->cluster.push_back(std::move(r));
    },
    [self](iteration_atom, iteration_record& r) {
      self->state.log->iterations.push_back(std::move(r));
    },
  };
}

double seconds_of(int64_t ns) {
  return double(ns) / 1e9;
}

/// Time-weighted provisioning over [start, end] from a step function of (time, value).
struct step_stats {
  double average = 0;
  double peak = 0;
  double integral = 0; // value x seconds
};

step_stats integrate(const std::vector<std::pair<double, double>>& steps, double start,
                     double end) {
  step_stats s;
  double value = 0;
  double t = start;
  for (auto& [when, v] : steps) {
    s.integral += value * std::max(0.0, when - t);
    t = std::max(t, when);
    value = v;
    s.peak = std::max(s.peak, v);
  }
  s.integral += value * std::max(0.0, end - t);
  s.average = end > start ? s.integral / (end - start) : 0;
  return s;
}

/// The common report fields from a cost/GPU timeline and per-iteration records.
json summarize(const std::vector<cluster_record>& cluster,
               const std::vector<iteration_record>& iterations, double rollout_busy_gpu_s,
               double training_busy_gpu_s, size_t jobs, double start, double end) {
  std::vector<std::pair<double, double>> cost, rgpus, tgpus;
  std::map<std::string, int64_t> decisions{
    {"direct_packing", 0}, {"rollout_scaling", 0}, {"new_group", 0}, {"rejected", 0}};
  std::set<std::string> rejected;
  for (auto& r : cluster) {
    double t = seconds_of(r.time_ns);
    cost.emplace_back(t, r.cost_per_hour);
    rgpus.emplace_back(t, r.rollout_gpus);
    tgpus.emplace_back(t, r.training_gpus);
    if (decisions.count(r.event))
      ++decisions[r.event];
    if (r.event == "rejected")
      rejected.insert(r.job);
    else if (r.event != "left" && r.event != "drifted")
      rejected.erase(r.job);
  }
  auto c = integrate(cost, start, end);
  auto rg = integrate(rgpus, start, end);
  auto tg = integrate(tgpus, start, end);
  // SLO per WEAVE §4.2: every iteration within SLO x the job's profiled solo iteration. The
  // first iteration after each admission (cold start) is not steady state and is left out.
  std::set<std::string> seen, missed, missed_realized;
  double slowdown = 0;
  int64_t steady = 0;
  for (auto& it : iterations) {
    seen.insert(it.job);
    if (it.index == 0)
      continue;
    ++steady;
    slowdown += it.duration_s / it.planned_solo_s;
    if (it.duration_s > it.slo * it.planned_solo_s * (1 + 1e-9))
      missed.insert(it.job);
    if (it.duration_s > it.slo * it.solo_s * (1 + 1e-9))
      missed_realized.insert(it.job);
  }
  for (auto& j : rejected) {
    missed.insert(j);
    missed_realized.insert(j);
  }
  auto attained = [&](const std::set<std::string>& m) {
    return jobs ? round4(double(jobs - std::min(jobs, m.size())) / double(jobs)) : 1.0;
  };
  json out;
  out["cost_per_hour_avg"] = round4(c.average);
  out["cost_per_hour_peak"] = round4(c.peak);
  out["cost_total"] = round4(c.integral / 3600);
  out["slo_attainment"] = attained(missed);
  out["slo_attainment_realized"] = attained(missed_realized);
  out["mean_slowdown"] = steady ? round4(slowdown / double(steady)) : 1.0;
  out["util_rollout"] = rg.integral > 0 ? round4(rollout_busy_gpu_s / rg.integral) : 0.0;
  out["util_train"] = tg.integral > 0 ? round4(training_busy_gpu_s / tg.integral) : 0.0;
  out["gpus_peak"] = {{"rollout", int64_t(rg.peak)}, {"train", int64_t(tg.peak)}};
  out["decisions"] = decisions;
  out["slo_missed_jobs"] = missed;
  out["jobs_with_iterations"] = int64_t(seen.size());
  out["iterations"] = int64_t(iterations.size());
  out["span_h"] = round4((end - start) / 3600);
  return out;
}

placement_chooser chooser_for(const std::string& policy, uint64_t seed) {
  if (policy == "solo-d")
    return solo_chooser();
  if (policy == "random")
    return random_chooser(seed);
  if (policy == "greedy")
    return greedy_chooser();
  return {};
}

/// One policy through the real scheduler and executors on the virtual clock.
caf::expected<policy_log> run_policy(const weave_scenario& sc, const std::string& policy,
                                     const std::string& store_dir) {
  auto db = open_scratch_store(store_dir);
  if (!db)
    return db.error();
  auto log = std::make_shared<policy_log>();
  auto ledger = std::make_shared<sim_ledger>();
  {
    driver d;
    auto& sys = d.system();
    auto metrics = std::make_shared<service_metrics>();
    auto store_handle = sys.spawn(store, std::shared_ptr<database>{std::move(*db)}, metrics);
    auto observer = sys.spawn(recorder, log);
    auto scheduler_slot = std::make_shared<cluster_scheduler_actor>();
    auto frameworks = sys.spawn(sim_frameworks, sc.config, sc.jobs, sc.lengths, sc.seed,
                                scheduler_slot, ledger);
    cluster_scheduler_config cfg{sc.config.cluster, sc.config.policy.weave, sc.migrate_tails,
                                 false, chooser_for(policy, sc.seed)};
    *scheduler_slot = sys.spawn(cluster_scheduler, std::move(cfg), store_handle,
                                caf::actor_cast<worker_actor>(frameworks), observer);
    d.run_to_quiescence();
    for (auto a : {caf::actor_cast<caf::actor>(frameworks), caf::actor_cast<caf::actor>(*scheduler_slot),
                   caf::actor_cast<caf::actor>(observer), caf::actor_cast<caf::actor>(store_handle)})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    d.run_to_quiescence();
  }
  log->ledger = *ledger;
  return std::move(*log);
}

/// veRL-style co-location (WEAVE §6.1): every phase of a job on its own training-pool nodes,
/// rollout slowed by the HBM bandwidth ratio (decode is memory-bound), a warm engine swap on
/// both phase switches, weights resharded locally instead of synced across the link.
json run_colocated(const weave_scenario& sc, double start) {
  const auto& c = sc.config.cluster;
  const auto& tnode = c.training.front();
  const gpu_spec* tgpu = c.find_gpu(tnode.gpu);
  const gpu_spec* rgpu = c.find_gpu(c.rollout.front().gpu);
  const double slow = rgpu && tgpu ? rgpu->hbm_tbps / tgpu->hbm_tbps : 1.0;
  const double gpu_cost = tgpu ? tgpu->cost_per_gpu_hour : 0;
  std::vector<std::pair<double, int>> deltas; // time, GPUs
  std::vector<iteration_record> iterations;
  double busy = 0;
  for (size_t i = 0; i < sc.jobs.size(); ++i) {
    const auto& a = sc.jobs[i];
    const auto& j = a.job;
    const int gpus = ((std::max(j.rollout_gpus, j.training_gpus) + tnode.gpus - 1) / tnode.gpus)
                     * tnode.gpus;
    const int per_node = std::min(gpus, tnode.gpus);
    const double swap =
      phase_switch_costs(j.rollout_memory_gb, per_node, sc.config.policy.weave).warm_s
      + phase_switch_costs(j.training_memory_gb, per_node, sc.config.policy.weave).warm_s;
    const double reshard = j.model_gb * 8 / sc.config.policy.weave.intra_cluster_gbps;
    rl_job planned = j;
    derive_phase_costs(planned, c, sc.config.policy.weave);
    const double planned_solo = planned.solo_s();
    double t = a.arrival_s;
    for (int64_t k = 0; k < j.iterations; ++k) {
      auto draw = sample_iteration(j.rollout_s, j.training_s, sc.lengths,
                                   sc.config.policy.weave.tail_migration_threshold, a.drift,
                                   double(k) / double(j.iterations), sc.seed, i, uint64_t(k));
      const double work = draw.rollout_s * slow + draw.training_s * j.training_gpus / gpus;
      const double d = work + swap + reshard;
      busy += work * gpus;
      t += d;
      iterations.push_back({j.id, "", k, 0, d, draw.rollout_s + draw.training_s, planned_solo,
                            j.slo});
    }
    deltas.emplace_back(a.arrival_s, gpus);
    deltas.emplace_back(t, -gpus);
  }
  std::stable_sort(deltas.begin(), deltas.end(),
                   [](auto& x, auto& y) { return x.first < y.first; });
  std::vector<cluster_record> cluster;
  int in_use = 0;
  double end = start;
  for (auto& [t, g] : deltas) {
    in_use += g;
    end = std::max(end, t);
    cluster.push_back({int64_t(std::llround(t * 1e9)), g > 0 ? "new_group" : "left", "",
                       in_use * gpu_cost, 0, in_use, 0});
  }
  auto out = summarize(cluster, iterations, 0, busy, sc.jobs.size(), start, end);
  out["note"] = "analytic: every phase on dedicated training-pool GPUs; no failures or drift "
                "handling";
  return out;
}

/// The offline optimum over the same active job sets as WEAVE's run.
json run_optimal(const weave_scenario& sc, const policy_log& weave_log, double start,
                 double end) {
  const auto& c = sc.config.cluster;
  auto node_of = [&](const node& n) {
    const gpu_spec* g = c.find_gpu(n.gpu);
    return pool_node{n.id, n.gpus, n.host_memory_gb, n.gpus * (g ? g->cost_per_gpu_hour : 0)};
  };
  offline_optimum opt{node_of(c.rollout.front()), node_of(c.training.front()),
                      sc.config.policy.weave.max_group_size,
                      sc.migrate_tails ? sc.config.policy.weave.tail_migration_cost_s : 0.0};
  std::map<std::string, rl_job> specs;
  for (auto& a : sc.jobs) {
    rl_job j = a.job;
    derive_phase_costs(j, c, sc.config.policy.weave);
    specs[j.id] = j;
  }
  std::map<std::string, rl_job> active;
  std::vector<std::pair<double, double>> cost;
  size_t most = 0;
  for (auto& r : weave_log.cluster) {
    if (r.event == "left" || r.event == "drifted")
      active.erase(r.job);
    else if (r.event != "rejected")
      active[r.job] = specs.at(r.job);
    most = std::max(most, active.size());
    if (most > offline_optimum::max_jobs)
      return json{{"error", fmt::format("{} concurrent jobs: brute force stops at {}", most,
                                        offline_optimum::max_jobs)}};
    std::vector<rl_job> jobs;
    for (auto& [id, j] : active)
      jobs.push_back(j);
    auto best = opt.cost_per_hour(jobs);
    if (!best)
      return json{{"error", "some active set has no feasible grouping"}};
    cost.emplace_back(seconds_of(r.time_ns), *best);
  }
  auto s = integrate(cost, start, end);
  json out;
  out["cost_per_hour_avg"] = round4(s.average);
  out["cost_per_hour_peak"] = round4(s.peak);
  out["cost_total"] = round4(s.integral / 3600);
  out["slo_attainment"] = 1.0;
  out["max_concurrent_jobs"] = int64_t(most);
  out["note"] = "offline brute force over the active job sets of the weave run, regrouping "
                "free at every arrival and departure; SLOs hold by construction (planned, not "
                "executed)";
  return out;
}

json latency(const std::vector<double>& us) {
  return json{{"p50", round4(percentile(us, 0.5))},
              {"p99", round4(percentile(us, 0.99))},
              {"max", round4(us.empty() ? 0 : *std::max_element(us.begin(), us.end()))}};
}

} // namespace

caf::expected<weave_replay_output> run_weave_replay(const weave_scenario& sc,
                                                    const std::string& out_dir) {
  if (auto err = make_output_dir(out_dir))
    return err;
  json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  std::map<std::string, int64_t> profiles;
  for (auto& a : sc.jobs)
    ++profiles[a.profile];
  report["workload"] = {{"source", sc.workload_source},
                        {"jobs", int64_t(sc.jobs.size())},
                        {"profiles", profiles},
                        {"tail_migration", sc.migrate_tails},
                        {"max_group_size", sc.config.policy.weave.max_group_size}};
  json timings;
  json policies = json::object();
  const double start = sc.jobs.empty() ? 0 : sc.jobs.front().arrival_s;
  std::optional<policy_log> weave_log;
  double weave_end = start;
  for (auto& policy : sc.policies) {
    auto t0 = std::chrono::steady_clock::now();
    if (policy == "colocated") {
      policies[policy] = run_colocated(sc, start);
    } else if (policy == "optimal") {
      if (!weave_log)
        policies[policy] = json{{"error", "needs the weave policy in the same scenario"}};
      else
        policies[policy] = run_optimal(sc, *weave_log, start, weave_end);
    } else {
      auto log = run_policy(sc, policy, (std::filesystem::path{out_dir} / "store" / policy).string());
      if (!log)
        return log.error();
      // The clock of every run starts at the same origin: the first arrival is the same.
      const double origin = log->cluster.empty() ? 0
                                                 : seconds_of(log->cluster.front().time_ns)
                                                     - start;
      for (auto& r : log->cluster)
        r.time_ns -= int64_t(std::llround(origin * 1e9));
      double end = start;
      for (auto& r : log->cluster)
        end = std::max(end, seconds_of(r.time_ns));
      auto out = summarize(log->cluster, log->iterations, log->ledger.rollout_busy_gpu_s,
                           log->ledger.training_busy_gpu_s, sc.jobs.size(), start, end);
      out["rejections"] = log->ledger.rejected; // "job: reason", in decision order
      out["crashes"] = log->ledger.crashes;
      out["submissions"] = log->ledger.submissions;
      policies[policy] = out;
      timings[policy]["decision_latency_us"] = latency(log->decision_us);
      if (policy == "weave") {
        weave_end = end;
        weave_log = std::move(*log);
      }
    }
    timings[policy]["wall_s"] =
      round4(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  report["policies"] = policies;
  auto ratio = [&](const char* a, const char* b) -> json {
    if (!policies.contains(a) || !policies.contains(b) || !policies[a].contains("cost_per_hour_avg")
        || !policies[b].contains("cost_per_hour_avg"))
      return nullptr;
    double y = policies[b]["cost_per_hour_avg"].get<double>();
    return y > 0 ? json(round4(policies[a]["cost_per_hour_avg"].get<double>() / y)) : json(nullptr);
  };
  report["cost_ratios"] = {{"solo-d/weave", ratio("solo-d", "weave")},
                           {"colocated/weave", ratio("colocated", "weave")},
                           {"weave/optimal", ratio("weave", "optimal")},
                           {"random/optimal", ratio("random", "optimal")},
                           {"greedy/optimal", ratio("greedy", "optimal")}};
  weave_replay_output out;
  out.report_json = report.dump(2) + "\n";
  out.timings_json = json{{"scenario", sc.name}, {"policies", timings}}.dump(2) + "\n";
  std::string table = fmt::format("{:<10} {:>9} {:>9} {:>11} {:>6} {:>7} {:>7} {:>9} {:>13} {:>16}\n",
                                  "policy", "$/h avg", "$/h peak", "$ total", "SLO", "util R",
                                  "util T", "GPUs R/T", "pack/scale/new", "decide p50/p99 us");
  for (auto& [name, p] : policies.items()) {
    if (p.contains("error")) {
      table += fmt::format("{:<10} {}\n", name, p["error"].get<std::string>());
      continue;
    }
    auto num = [&](const char* k) { return p.contains(k) ? p[k].get<double>() : 0.0; };
    std::string gpus = p.contains("gpus_peak")
                         ? fmt::format("{}/{}", p["gpus_peak"]["rollout"].get<int64_t>(),
                                       p["gpus_peak"]["train"].get<int64_t>())
                         : "-";
    std::string dec = p.contains("decisions")
                        ? fmt::format("{}/{}/{}", p["decisions"]["direct_packing"].get<int64_t>(),
                                      p["decisions"]["rollout_scaling"].get<int64_t>(),
                                      p["decisions"]["new_group"].get<int64_t>())
                        : "-";
    std::string lat = timings[name].contains("decision_latency_us")
                        ? fmt::format("{:.1f}/{:.1f}",
                                      timings[name]["decision_latency_us"]["p50"].get<double>(),
                                      timings[name]["decision_latency_us"]["p99"].get<double>())
                        : "-";
    table += fmt::format("{:<10} {:>9.1f} {:>9.1f} {:>11.0f} {:>6.3f} {:>7.3f} {:>7.3f} {:>9} "
                         "{:>13} {:>16}\n",
                         name, num("cost_per_hour_avg"), num("cost_per_hour_peak"),
                         num("cost_total"), num("slo_attainment"), num("util_rollout"),
                         num("util_train"), gpus, dec, lat);
  }
  out.summary = std::move(table);
  if (auto err = write_report_files(out_dir, out.report_json, out.timings_json))
    return err;
  return out;
}

} // namespace loom::replay
