#include "replay/weave_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "replay/report.hpp"

namespace loom::replay {

double seconds_of(int64_t ns) {
  return double(ns) / 1e9;
}

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

namespace {

/// Decisions by kind, and the jobs whose last decision was a rejection.
std::pair<std::map<std::string, int64_t>, std::set<std::string>>
decisions_of(const std::vector<cluster_record>& cluster) {
  std::map<std::string, int64_t> decisions{
    {"direct_packing", 0}, {"rollout_scaling", 0}, {"new_group", 0}, {"rejected", 0}};
  std::set<std::string> rejected;
  for (auto& r : cluster) {
    if (is_placement(r.event) || r.event == cluster_event::rejected)
      ++decisions[std::string{to_string(r.event)}];
    if (r.event == cluster_event::rejected)
      rejected.insert(r.job);
    else if (is_placement(r.event))
      rejected.erase(r.job);
  }
  return {decisions, rejected};
}

/// SLO per WEAVE §4.2: every iteration within SLO x the job's profiled solo iteration (and,
/// realized, x the solo time its worker measured). The first iteration after each admission
/// (cold start) is not steady state and is left out. Rejected jobs miss theirs.
struct slo_stats {
  std::set<std::string> seen, missed, missed_realized;
  double slowdown = 0;
  int64_t steady = 0;
};

slo_stats slos_of(const std::vector<iteration_record>& iterations,
                  const std::set<std::string>& rejected) {
  slo_stats s;
  for (auto& it : iterations) {
    s.seen.insert(it.job);
    if (it.index == 0)
      continue;
    ++s.steady;
    s.slowdown += it.duration_s / it.planned_solo_s;
    if (!within_slo(it.duration_s, it.slo, it.planned_solo_s))
      s.missed.insert(it.job);
    if (!within_slo(it.duration_s, it.slo, it.solo_s))
      s.missed_realized.insert(it.job);
  }
  for (auto& j : rejected) {
    s.missed.insert(j);
    s.missed_realized.insert(j);
  }
  return s;
}

} // namespace

ordered_json summarize(const std::vector<cluster_record>& cluster,
                       const std::vector<iteration_record>& iterations,
                       double rollout_busy_gpu_s, double training_busy_gpu_s, size_t jobs,
                       double start, double end) {
  std::vector<std::pair<double, double>> cost, rgpus, tgpus;
  for (auto& r : cluster) {
    double t = seconds_of(r.time_ns);
    cost.emplace_back(t, r.cost_per_hour);
    rgpus.emplace_back(t, r.rollout_gpus);
    tgpus.emplace_back(t, r.training_gpus);
  }
  auto [decisions, rejected] = decisions_of(cluster);
  auto c = integrate(cost, start, end);
  auto rg = integrate(rgpus, start, end);
  auto tg = integrate(tgpus, start, end);
  auto slo = slos_of(iterations, rejected);
  auto attained = [&](const std::set<std::string>& m) {
    return jobs ? round4(double(jobs - std::min(jobs, m.size())) / double(jobs)) : 1.0;
  };
  ordered_json out;
  out["cost_per_hour_avg"] = round4(c.average);
  out["cost_per_hour_peak"] = round4(c.peak);
  out["cost_total"] = round4(c.integral / 3600);
  // Dollars for the work done, whatever span it took: $/h divides by each policy's own span,
  // which a policy that stretches its jobs lengthens (#46).
  out["cost_per_iteration"] =
    iterations.empty() ? 0.0 : round4(c.integral / 3600 / double(iterations.size()));
  out["slo_attainment"] = attained(slo.missed);
  out["slo_attainment_realized"] = attained(slo.missed_realized);
  out["mean_slowdown"] = slo.steady ? round4(slo.slowdown / double(slo.steady)) : 1.0;
  out["util_rollout"] = rg.integral > 0 ? round4(rollout_busy_gpu_s / rg.integral) : 0.0;
  out["util_train"] = tg.integral > 0 ? round4(training_busy_gpu_s / tg.integral) : 0.0;
  out["gpus_peak"] = {{"rollout", int64_t(rg.peak)}, {"train", int64_t(tg.peak)}};
  out["decisions"] = decisions;
  // Jobs placed again without a new submission: drifted (§5.3) and moved (consolidation).
  out["drift_replacements"] = std::count_if(cluster.begin(), cluster.end(), [](auto& r) {
    return r.event == cluster_event::drifted;
  });
  out["moves"] = std::count_if(cluster.begin(), cluster.end(), [](auto& r) {
    return r.event == cluster_event::moved;
  });
  out["slo_missed_jobs"] = slo.missed;
  out["jobs_with_iterations"] = int64_t(slo.seen.size());
  out["iterations"] = int64_t(iterations.size());
  out["span_h"] = round4((end - start) / 3600);
  return out;
}

namespace {

std::string table_row(const std::string& name, const ordered_json& p, const ordered_json& t) {
  if (p.contains("error"))
    return fmt::format("{:<11} {}\n", name, p["error"].get<std::string>());
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
  std::string lat = t.contains("decision_latency_us")
                      ? fmt::format("{:.1f}/{:.1f}", t["decision_latency_us"]["p50"].get<double>(),
                                    t["decision_latency_us"]["p99"].get<double>())
                      : "-";
  // The offline optimum places jobs but runs no iterations.
  std::string per_iteration =
    p.contains("cost_per_iteration") ? fmt::format("{:.2f}", num("cost_per_iteration")) : "-";
  return fmt::format("{:<11} {:>9.1f} {:>9.1f} {:>11.0f} {:>7} {:>6.3f} {:>7.3f} {:>7.3f} "
                     "{:>9} {:>13} {:>16}\n",
                     name, num("cost_per_hour_avg"), num("cost_per_hour_peak"),
                     num("cost_total"), per_iteration, num("slo_attainment"),
                     num("util_rollout"), num("util_train"), gpus, dec, lat);
}

} // namespace

std::string summary_table(const ordered_json& policies, const ordered_json& timings) {
  std::string table =
    fmt::format("{:<11} {:>9} {:>9} {:>11} {:>7} {:>6} {:>7} {:>7} {:>9} {:>13} {:>16}\n",
                "policy", "$/h avg", "$/h peak", "$ total", "$/iter", "SLO", "util R", "util T",
                "GPUs R/T", "pack/scale/new", "decide p50/p99 us");
  for (auto& [name, p] : policies.items())
    table += table_row(name, p, timings.contains(name) ? timings[name] : ordered_json::object());
  return table;
}

} // namespace loom::replay
