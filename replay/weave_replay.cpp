#include "replay/weave_replay.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include "metrics/metrics.hpp"
#include "protocol/error.hpp"
#include "replay/baselines.hpp"
#include "replay/driver.hpp"
#include "replay/report.hpp"
#include "replay/seed_spread.hpp"
#include "replay/sim_frameworks.hpp"
#include "replay/weave_analytic.hpp"
#include "replay/weave_figures.hpp"
#include "replay/weave_summary.hpp"
#include "scheduler/cluster_scheduler.hpp"
#include "store/database.hpp"
#include "store/store_actor.hpp"

namespace loom::replay {

namespace {

struct recorder_state {
  static inline const char* name = "recorder";
  std::shared_ptr<policy_log> log;
};

observer_actor::behavior_type recorder(observer_actor::stateful_pointer<recorder_state> self,
                                       std::shared_ptr<policy_log> log) {
  self->state.log = std::move(log);
  return {
    [self](cluster_atom, cluster_record& r) {
      if (r.event != cluster_event::left && r.event != cluster_event::drifted
          && r.event != cluster_event::moved)
        self->state.log->decision_us.push_back(r.decision_us);
      self->state.log->cluster.push_back(std::move(r));
    },
    [self](iteration_atom, iteration_record& r) {
      self->state.log->iterations.push_back(std::move(r));
    },
    [self](overrun_atom, const std::string&, phase_kind, double) { ++self->state.log->overruns; },
  };
}

placement_chooser chooser_for(const std::string& policy, uint64_t seed) {
  if (policy == "solo-d")
    return solo_chooser();
  if (policy == "random" || policy == "random-slo")
    return random_chooser(seed, policy == "random-slo");
  if (policy == "greedy" || policy == "greedy-slo")
    return greedy_chooser(policy == "greedy-slo");
  return {}; // weave, weave-paper: Algorithm 1's own choice (they differ in consolidation only)
}

/// One policy through the real scheduler and executors on the virtual clock, wired as `serve`
/// wires them: the scheduler works through the worker edge (here the simulated frameworks),
/// which is connected to the scheduler before anything arrives.
caf::expected<policy_log> run_policy(const weave_scenario& sc, const std::string& policy,
                                     std::shared_ptr<length_draws> draws,
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
    auto frameworks = sys.spawn(sim_frameworks, sc.config, sc.jobs, std::move(draws), ledger, 1.0);
    auto weave = sc.config.policy.weave;
    weave.consolidate &= policy != "weave-paper";
    cluster_scheduler_config cfg{sc.config.cluster, weave, sc.migrate_tails, false,
                                 chooser_for(policy, sc.seed), {}};
    auto scheduler = sys.spawn(cluster_scheduler, std::move(cfg), store_handle,
                               caf::actor_cast<worker_actor>(frameworks), observer);
    caf::anon_send(frameworks, connect_atom::value, scheduler);
    d.run_to_quiescence();
    for (auto a : {caf::actor_cast<caf::actor>(frameworks), caf::actor_cast<caf::actor>(scheduler),
                   caf::actor_cast<caf::actor>(observer), caf::actor_cast<caf::actor>(store_handle)})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    d.run_to_quiescence();
  }
  log->ledger = *ledger;
  return std::move(*log);
}

ordered_json latency(const std::vector<double>& us) {
  return ordered_json{{"p50", round4(percentile(us, 0.5))},
                      {"p99", round4(percentile(us, 0.99))},
                      {"max", round4(us.empty() ? 0 : *std::max_element(us.begin(), us.end()))}};
}

} // namespace

ordered_json workload_json(const weave_scenario& sc) {
  std::map<std::string, int64_t> profiles;
  for (auto& a : sc.jobs)
    ++profiles[a.profile];
  return {{"source", sc.workload_source},
          {"jobs", int64_t(sc.jobs.size())},
          {"profiles", profiles},
          {"tail_migration", sc.migrate_tails},
          {"max_group_size", sc.config.policy.weave.max_group_size}};
}

ordered_json policy_json(const weave_scenario& sc, policy_log& log, double start, double& end) {
  // The clock of every run starts at the same origin: the first arrival is the same.
  const double origin = log.cluster.empty() ? 0 : seconds_of(log.cluster.front().time_ns) - start;
  for (auto& r : log.cluster)
    r.time_ns -= int64_t(std::llround(origin * 1e9));
  end = start;
  for (auto& r : log.cluster)
    end = std::max(end, seconds_of(r.time_ns));
  auto out = summarize(log.cluster, log.iterations, log.ledger.rollout_busy_gpu_s,
                       log.ledger.training_busy_gpu_s, sc.jobs.size(), start, end);
  out["rejections"] = log.ledger.rejected; // "job: reason", in decision order
  out["crashes"] = log.ledger.crashes;
  out["submissions"] = log.ledger.submissions;
  // Drift re-placements are decisions without a submission: churn shows as a ratio above 1.
  int64_t decided = 0;
  for (auto& [kind, n] : out["decisions"].items())
    decided += n.get<int64_t>();
  out["decisions_per_submission"] =
    log.ledger.submissions > 0 ? round4(double(decided) / double(log.ledger.submissions)) : 0.0;
  out["phase_overruns"] = log.overruns;
  out["figures"] = weave_series(log.cluster, log.iterations, start);
  out["figures"]["group_gantt"] = group_gantt(log.ledger.activities);
  return out;
}

namespace {

/// weave's $/h over the optimum that regroups only at arrivals.
ordered_json arrivals_ratio(const ordered_json& policies) {
  if (!policies.contains("weave") || !policies.contains("optimal")
      || !policies["optimal"].contains("arrivals_only"))
    return nullptr;
  double y = policies["optimal"]["arrivals_only"]["cost_per_hour_avg"].get<double>();
  return y > 0 ? ordered_json(round4(policies["weave"]["cost_per_hour_avg"].get<double>() / y))
               : ordered_json(nullptr);
}

/// The policies' cost against each other on `metric` (a policy field).
ordered_json cost_ratios(const ordered_json& policies, const char* metric = "cost_per_hour_avg") {
  auto ratio = [&](const char* a, const char* b) -> ordered_json {
    if (!policies.contains(a) || !policies.contains(b) || !policies[a].contains(metric)
        || !policies[b].contains(metric))
      return nullptr;
    double y = policies[b][metric].get<double>();
    return y > 0 ? ordered_json(round4(policies[a][metric].get<double>() / y))
                 : ordered_json(nullptr);
  };
  ordered_json out{{"solo-d/weave", ratio("solo-d", "weave")},
                   {"colocated/weave", ratio("colocated", "weave")},
                   {"weave-paper/weave", ratio("weave-paper", "weave")},
                   {"weave/optimal", ratio("weave", "optimal")},
                   {"weave/bound", ratio("weave", "bound")},
                   {"optimal/bound", ratio("optimal", "bound")}};
  if (std::string_view{metric} == "cost_per_hour_avg")
    out["weave/optimal-arrivals"] = arrivals_ratio(policies);
  for (auto [a, b] : {std::pair{"random", "optimal"}, std::pair{"greedy", "optimal"},
                      std::pair{"random-slo", "weave"}, std::pair{"greedy-slo", "weave"}})
    out[fmt::format("{}/{}", a, b)] = ratio(a, b);
  return out;
}

} // namespace

namespace {

struct seed_report {
  ordered_json report;
  ordered_json timings; // policy -> wall-clock figures
};

/// Every policy of the scenario under its one seed.
caf::expected<seed_report> run_one_seed(const weave_scenario& sc, const std::string& out_dir) {
  ordered_json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  report["workload"] = workload_json(sc);
  ordered_json timings;
  ordered_json policies = ordered_json::object();
  const double start = sc.jobs.empty() ? 0 : sc.jobs.front().arrival_s;
  std::optional<policy_log> weave_log;
  double weave_end = start;
  auto draws = length_draws_of(sc); // every policy runs the same iterations
  for (auto& policy : sc.policies) {
    auto t0 = std::chrono::steady_clock::now();
    if (policy == "colocated") {
      policies[policy] = run_colocated(sc, *draws, start);
    } else if (policy == "optimal" || policy == "bound") {
      auto run = policy == "optimal" ? run_optimal : run_bound;
      policies[policy] = weave_log ? run(sc, weave_log->cluster, start, weave_end)
                                   : ordered_json{{"error", "needs the weave policy in the same "
                                                            "scenario"}};
    } else {
      auto log = run_policy(sc, policy, draws,
                            (std::filesystem::path{out_dir} / "store" / policy).string());
      if (!log)
        return log.error();
      double end = start;
      policies[policy] = policy_json(sc, *log, start, end);
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
  report["cost_ratios"] = cost_ratios(policies);
  report["cost_ratios_per_iteration"] = cost_ratios(policies, "cost_per_iteration");
  return seed_report{std::move(report), std::move(timings)};
}

caf::expected<weave_replay_output> write_output(const std::string& out_dir,
                                                const std::string& name,
                                                const ordered_json& report,
                                                const ordered_json& policy_timings,
                                                const ordered_json& table_policies) {
  weave_replay_output out;
  out.report_json = report.dump(2) + "\n";
  out.timings_json = ordered_json{{"scenario", name}, {"policies", policy_timings}}.dump(2) + "\n";
  out.summary = summary_table(table_policies, policy_timings);
  if (auto err = write_report_files(out_dir, out.report_json, out.timings_json))
    return err;
  return out;
}

/// The figures whose worst seed matters: SLO attainment and the cost ratios, mean (min-max).
std::string spread_lines(const ordered_json& across) {
  auto line = [](const std::string& what, const ordered_json& s) {
    return fmt::format("  {:<18} {:.4f} ({:.4f}-{:.4f})\n", what, s["mean"].get<double>(),
                       s["min"].get<double>(), s["max"].get<double>());
  };
  std::string text = "SLO attainment, mean (min-max) over the seeds:\n";
  for (auto& [name, p] : across["policies"].items())
    if (p.contains("slo_attainment"))
      text += line(name, p["slo_attainment"]);
  text += "cost ratios on $/h, mean (min-max):\n";
  for (auto& [name, r] : across["cost_ratios"].items())
    text += line(name, r);
  text += "cost ratios on $ per finished iteration, mean (min-max):\n";
  for (auto& [name, r] : across["cost_ratios_per_iteration"].items())
    text += line(name, r);
  return text;
}

/// One full report per seed under DIR/seed-N; DIR's report gives each metric's mean, min and
/// max over the seeds, and per seed the figures a reader compares first.
caf::expected<weave_replay_output> run_seeds(const weave_scenario& sc, const std::string& out_dir) {
  std::vector<ordered_json> reports, timings;
  ordered_json per_seed = ordered_json::array();
  for (auto seed : sc.seeds) {
    auto made = make_seed_dir(out_dir, seed);
    if (!made)
      return made.error();
    const auto& dir = *made;
    auto run = run_one_seed(with_seed(sc, seed), dir);
    if (!run)
      return run.error();
    if (auto out = write_output(dir, sc.name, run->report, run->timings, run->report["policies"]);
        !out)
      return out.error();
    ordered_json slo = ordered_json::object();
    for (auto& [name, p] : run->report["policies"].items())
      if (p.contains("slo_attainment"))
        slo[name] = p["slo_attainment"];
    per_seed.push_back({{"seed", seed},
                        {"report", seed_report_dir(seed) + "/report.json"},
                        {"slo_attainment", slo},
                        {"cost_ratios", run->report["cost_ratios"]},
                        {"cost_ratios_per_iteration", run->report["cost_ratios_per_iteration"]}});
    reports.push_back(std::move(run->report));
    timings.push_back(std::move(run->timings));
  }
  // Figures and job lists stay in the per-seed reports; what is averaged is every number.
  const std::vector<std::string> skip{"figures", "workload"};
  ordered_json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  report["seeds"] = sc.seeds;
  report["workload"] = workload_json(sc);
  report["workload"].erase("profiles"); // each seed draws its own: see its report
  auto spread = spread_across(reports, "/policies", skip);
  report["policies"] = means_of(spread); // what a one-seed report says, averaged
  report["cost_ratios"] = means_of(spread_across(reports, "/cost_ratios"));
  report["cost_ratios_per_iteration"] =
    means_of(spread_across(reports, "/cost_ratios_per_iteration"));
  report["across_seeds"] = {
    {"policies", spread},
    {"cost_ratios", spread_across(reports, "/cost_ratios")},
    {"cost_ratios_per_iteration", spread_across(reports, "/cost_ratios_per_iteration")}};
  report["per_seed"] = per_seed;
  // timings.json: each policy's wall-clock figures, averaged over the seeds.
  auto out = write_output(out_dir, sc.name, report, means_of(spread_across(timings, "")),
                          report["policies"]);
  if (out)
    out->summary = fmt::format("means over {} seeds\n{}{}", sc.seeds.size(), out->summary,
                               spread_lines(report["across_seeds"]));
  return out;
}

} // namespace

caf::expected<weave_replay_output> run_weave_replay(const weave_scenario& sc,
                                                    const std::string& out_dir) {
  if (auto err = make_output_dir(out_dir))
    return err;
  if (sc.seeds.size() > 1)
    return run_seeds(sc, out_dir);
  auto run = run_one_seed(sc, out_dir);
  if (!run)
    return run.error();
  return write_output(out_dir, sc.name, run->report, run->timings, run->report["policies"]);
}

} // namespace loom::replay
