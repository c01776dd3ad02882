#include "replay/gen_replay.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>

#include "generation/config_search.hpp"
#include "metrics/metrics.hpp"
#include "protocol/error.hpp"
#include "replay/gen_run.hpp"
#include "replay/report.hpp"
#include "replay/rl_step_clock.hpp"
#include "replay/seed_spread.hpp"

namespace loom::replay {

namespace {

using json = nlohmann::json;

struct run_spec {
  gen_deployment initial;
  bool planner = false;
  bool balancer = false;
};

caf::expected<gen_run_log> run_once(const gen_scenario& sc, const run_spec& spec,
                                    const std::string& store_dir) {
  const engine_model engine = engine_of(sc);
  gen_run_spec run{deployment_for(sc, spec.initial.parallel, spec.planner, spec.balancer),
                   framework_for(sc, spec.initial.parallel), store_dir};
  return run_generation(engine, run);
}

/// The run's RL time: its steps' generation and training on the clock the framework steps
/// (rl_step_clock), without what it spent between steps waiting on nothing.
double rl_time_s(const gen_scenario& sc, const gen_run_log& log) {
  rl_step_clock clock{sc.training_s, sc.off_policy_steps};
  double start = 0;
  for (double makespan : log.makespans)
    start = clock.step_ended(start + makespan);
  return clock.training_end();
}

double samples_per_s(const gen_scenario& sc, const gen_run_log& log) {
  double samples = 0;
  for (auto& s : sc.steps)
    samples += double(s.size());
  double time = rl_time_s(sc, log);
  return time > 0 ? samples / time : 0.0;
}

/// Steps of policy lag per sample, averaged: the first step's are generated on the initial
/// weights (0), every later one's on weights off_policy_steps behind.
double mean_staleness(const gen_scenario& sc) {
  double samples = 0, lag = 0;
  for (size_t k = 0; k < sc.steps.size(); ++k) {
    samples += double(sc.steps[k].size());
    lag += double(sc.steps[k].size()) * double(std::min<size_t>(k, size_t(sc.off_policy_steps)));
  }
  return samples > 0 ? lag / samples : 0.0;
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}


/// What report.html draws beyond the figures above: migrations per step, and in the curve
/// step the reconfigurations and the migrations per bin.
json gen_figures(const gen_run_log& log) {
  json per_step = json::array();
  for (size_t i = 0; i < log.makespans.size(); ++i)
    per_step.push_back(i < log.step_migrations.size() ? log.step_migrations[i] : 0);
  json reconfigs = json::array();
  for (auto& [t, detail] : log.curve_reconfigs)
    reconfigs.push_back({round4(t), detail});
  // Every bin from the step's start to its last migration: an even time axis.
  std::vector<int64_t> counts;
  if (!log.curve_migrations.empty())
    counts.resize(size_t(std::max<int64_t>(0, log.curve_migrations.rbegin()->first + 1)));
  for (auto [bin, n] : log.curve_migrations)
    if (bin >= 0)
      counts[size_t(bin)] = n;
  return {{"step_migrations", per_step},
          {"curve_step_reconfigurations", reconfigs},
          {"curve_step_migrations", {{"bin_s", migration_bin_s}, {"counts", counts}}}};
}

/// §6.2.2's accounting of a switch (~7.5 s there: 1.5 s switching, 5.4 s KV recompute): what
/// Loom's switches took, measured from the drain to the new layout admitting (the engines'
/// shard loads inside), the KV they moved as App. A's cost model prices it, and what the
/// planner predicted (C_sw + C_mig).
json switch_accounting(const gen_run_log& log) {
  std::vector<double> switching, kv, total, planned;
  for (auto& s : log.switches) {
    switching.push_back(s.switch_s);
    kv.push_back(s.kv_s);
    total.push_back(s.switch_s + s.kv_s);
    planned.push_back(s.planned_s);
  }
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? json(nullptr) : json(round4(mean_of(v)));
  };
  auto max = [](const std::vector<double>& v) {
    return v.empty() ? json(nullptr) : json(round4(*std::max_element(v.begin(), v.end())));
  };
  return {{"switches", log.switches.size()},  {"switching_s_mean", mean(switching)},
          {"kv_s_mean", mean(kv)},            {"total_s_mean", mean(total)},
          {"total_s_max", max(total)},        {"planned_s_mean", mean(planned)}};
}

} // namespace

json gen_policy_json(const gen_scenario& sc, const gen_deployment& initial,
                     const gen_run_log& log) {
  json out;
  out["initial_deployment"] = initial.name();
  out["makespan_s"] = {{"mean", round4(mean_of(log.makespans))},
                       {"p50", round4(percentile(log.makespans, 0.5))},
                       {"p99", round4(percentile(log.makespans, 0.99))}};
  out["samples_per_s"] = round4(samples_per_s(sc, log));
  out["rl_time_s"] = round4(rl_time_s(sc, log));
  out["mean_staleness_steps"] = round4(mean_staleness(sc));
  out["reconfigurations"] = log.reconfigurations;
  out["migrations"] = log.migrations;
  out["kv_transfers"] = log.kv_transfers;
  out["kv_recomputes"] = log.kv_recomputes;
  out["preemptions"] = log.preemptions;
  out["switch_accounting"] = switch_accounting(log);
  out["forecast_rel_error"] = log.forecast_histogram_error.empty()
                                ? json(nullptr)
                                : json(round4(mean_of(log.forecast_histogram_error)));
  out["forecast_mean_length_rel_error"] = log.forecast_mean_error.empty()
                                            ? json(nullptr)
                                            : json(round4(mean_of(log.forecast_mean_error)));
  json steps = json::array();
  for (auto m : log.makespans)
    steps.push_back(round4(m));
  out["step_makespans_s"] = steps;
  json starts = json::array();
  for (auto t : log.step_starts)
    starts.push_back(round4(t - log.step_starts.front()));
  out["step_start_s"] = starts; // from the first step's start
  out["timeline"] = log.timeline;
  json curve = json::array();
  for (auto [t, n] : log.curve)
    curve.push_back({round4(t), n});
  out["remaining_curve"] = {{"step", sc.curve_step}, {"points", curve}};
  out["figures"] = gen_figures(log);
  return out;
}

namespace {

/// The static baselines' sweep: every fixed deployment of one config the planner may choose
/// for a full batch (throughput_configs: TP within a node as veRL-TO sweeps it, and EP and AFD
/// where the model and the cost model have them), or TP8 alone when no policy needs the best;
/// each run's wall time beside it.
struct static_sweep {
  struct run {
    parallel_config parallel;
    dispatch_mode dispatch;
    gen_run_log log;
    double wall_s = 0;

    /// Its sweep key: the config (tp4, afd6:2), the dispatch after it where it is not the
    /// scenario's (tp4 round-robin).
    std::string key(const gen_scenario& sc) const;
  };
  std::vector<run> runs; // in throughput_configs' order, those that finished every step
  size_t best = 0;       // by samples per second, the first of equals
  std::vector<std::pair<run, std::string>> failed; // a config that did not, and why (a step
                                                   // past its timeout): no candidate

  const run* find(const parallel_config& c) const {
    auto it = std::find_if(runs.begin(), runs.end(), [&](auto& r) { return r.parallel == c; });
    return it == runs.end() ? nullptr : &*it;
  }
  gen_deployment best_deployment(int gpus) const {
    return {runs[best].parallel, gpus / runs[best].parallel.gpus()};
  }
  /// The scenario as the best static deployment runs it: with the dispatch that won.
  gen_scenario best_dealt(const gen_scenario& sc) const {
    auto dealt = sc;
    dealt.dispatch = runs[best].dispatch;
    return dealt;
  }
};

/// A config's name as the sweep's keys and store folders spell it: tp4, afd6:2.
std::string lower(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char x) { return char(std::tolower(x)); });
  return name;
}

std::string static_sweep::run::key(const gen_scenario& sc) const {
  auto k = lower(parallel.name());
  return dispatch == sc.dispatch ? k : k + " " + std::string(to_string(dispatch));
}

/// What the static sweep tries: the planner's full-batch configs on the planner's own
/// parameters, with the AFD splits profiled as gen_planner profiles them.
std::vector<parallel_config> static_configs(const gen_scenario& sc, const engine_model& engine) {
  auto params = deployment_for(sc, parallel_config{1}, true, true).planner;
  if (params.afd_configs.empty())
    params.afd_configs = profile_afd_configs(engine, params.gpus_per_node);
  return throughput_configs(engine, sc.gpus, params);
}

caf::expected<static_sweep> sweep_statics(const gen_scenario& sc, const engine_model& engine,
                                          bool adaptive, const std::string& out_dir) {
  static_sweep out;
  // A framework that deals a batch in contiguous slices can deal it round-robin as well; the
  // planner places every request itself, so the baseline gets the better of the two.
  std::vector<dispatch_mode> deals{sc.dispatch};
  if (adaptive && sc.dispatch != dispatch_mode::round_robin)
    deals.push_back(dispatch_mode::round_robin);
  const auto configs = static_configs(sc, engine);
  for (auto deal : deals)
    for (auto& c : configs) {
      if (!adaptive && c != parallel_config{8})
        continue;
      auto t0 = std::chrono::steady_clock::now();
      static_sweep::run r{c, deal, {}, 0};
      auto folder = "static-" + r.key(sc); // "ep8/tp1 round-robin": static-ep8-tp1-round-robin
      std::replace_if(folder.begin(), folder.end(), [](char x) { return x == '/' || x == ' '; },
                      '-');
      auto dealt = sc;
      dealt.dispatch = deal;
      auto log = run_once(dealt, {{c, sc.gpus / c.gpus()}, false, false},
                          (std::filesystem::path{out_dir} / "store" / folder).string());
      if (!log) {
        out.failed.emplace_back(std::move(r), render(log.error()));
        continue;
      }
      r.log = std::move(*log);
      r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.runs.push_back(std::move(r));
    }
  if (out.runs.empty())
    return make_error(errc::invalid_argument,
                      out.failed.empty()
                        ? fmt::format("{} fits no config the planner may choose on {} {} GPUs",
                                      sc.model.name, sc.gpus, sc.gpu.name)
                        : fmt::format("no static config of {} on {} {} GPUs finished its "
                                      "steps (static-{}: {})",
                                      sc.model.name, sc.gpus, sc.gpu.name,
                                      out.failed.front().first.key(sc),
                                      out.failed.front().second));
  for (size_t i = 1; i < out.runs.size(); ++i)
    if (samples_per_s(sc, out.runs[i].log) > samples_per_s(sc, out.runs[out.best].log))
      out.best = i;
  return out;
}

/// static-best or static-tp8, from the sweep.
json static_policy(const gen_scenario& sc, const std::string& name, const static_sweep& sweep,
                   json& timings) {
  auto* run = name == "static-best" ? &sweep.runs[sweep.best] : sweep.find(parallel_config{8});
  // static-tp8 is veRL-LO as the scenario deals it: find() takes the first run, the
  // scenario's dispatch.
  if (!run) {
    for (auto& [r, why] : sweep.failed)
      if (r.parallel == parallel_config{8})
        return {{"error", "TP8: " + why}};
    return {{"error", fmt::format("TP=8 does not fit {} GPUs of {} per node", sc.gpus,
                                  sc.planner.gpus_per_node)}};
  }
  auto p = gen_policy_json(sc, {run->parallel, sc.gpus / run->parallel.gpus()}, run->log);
  if (name == "static-best") {
    json all;
    for (auto& r : sweep.runs)
      all[r.key(sc)] = round4(samples_per_s(sc, r.log));
    p["sweep_samples_per_s"] = all;
    if (!sweep.failed.empty()) {
      json failed;
      for (auto& [r, why] : sweep.failed)
        failed[r.key(sc)] = why;
      p["sweep_failed"] = failed;
    }
    p["dispatch"] = to_string(run->dispatch);
  }
  timings[name]["wall_s"] = round4(run->wall_s);
  timings[name]["events"] = run->log.events;
  return p;
}

/// planner-only, balancer-only or orchestr, from the best static deployment.
caf::expected<json> adaptive_policy(const gen_scenario& sc, const std::string& name,
                                    const gen_deployment& best, const std::string& store_dir,
                                    json& timings) {
  run_spec spec{best, name != "balancer-only", name != "planner-only"};
  auto t0 = std::chrono::steady_clock::now();
  auto log = run_once(sc, spec, store_dir);
  if (!log)
    return log.error();
  timings[name]["wall_s"] =
    round4(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  timings[name]["events"] = log->events;
  if (!log->solve_ms.empty()) {
    auto max = *std::max_element(log->solve_ms.begin(), log->solve_ms.end());
    timings[name]["solve_ms"] = {{"p50", round4(percentile(log->solve_ms, 0.5))},
                                 {"max", round4(max)},
                                 {"calls", log->solve_ms.size()}};
  }
  return gen_policy_json(sc, spec.initial, *log);
}

json speedups_of(json& policies) {
  json speedups = json::object();
  if (policies.contains("static-best") && policies["static-best"].contains("samples_per_s")) {
    const double base = policies["static-best"]["samples_per_s"].get<double>();
    for (auto& [name, p] : policies.items())
      if (p.contains("samples_per_s") && base > 0)
        speedups[name] = round4(p["samples_per_s"].get<double>() / base);
  }
  return speedups;
}

json paper_json(const gen_scenario::paper_figure& f) {
  return {{"orchestr_vs_static_best", f.orchestr_vs_static_best}, {"source", f.source}};
}

json gen_report(const gen_scenario& sc, const json& policies, const json& speedups) {
  size_t batch = sc.steps.empty() ? 0 : sc.steps.front().size();
  json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  report["deployment"] = {{"model", sc.model.name}, {"gpu", sc.gpu.name}, {"gpus", sc.gpus},
                          {"engine_model", sc.profile ? "profile " + sc.profile_name + " ("
                                                          + sc.profile->source + ")"
                                                      : std::string{"roofline"}}};
  report["workload"] = {{"source", sc.workload_source},
                        {"steps", sc.steps.size()},
                        {"batch", batch},
                        {"max_tokens", sc.max_tokens},
                        {"training_s_per_step", sc.training_s},
                        {"off_policy_steps", sc.off_policy_steps},
                        {"dispatch", to_string(sc.dispatch)}};
  report["policies"] = policies;
  report["throughput_vs_static_best"] = speedups;
  if (sc.paper)
    report["paper"] = paper_json(*sc.paper);
  return report;
}

std::string gen_table_row(const std::string& name, json& p, json& t, const json& speedups) {
  if (p.contains("error"))
    return fmt::format("{:<14} {}\n", name, p["error"].get<std::string>());
  std::string err = p["forecast_rel_error"].is_null()
                      ? "-"
                      : fmt::format("{:.3f}", p["forecast_rel_error"].get<double>());
  std::string solve = t.contains("solve_ms")
                        ? fmt::format("{:.2f}/{:.2f}", t["solve_ms"]["p50"].get<double>(),
                                      t["solve_ms"]["max"].get<double>())
                        : "-";
  return fmt::format("{:<14} {:>9} {:>10.1f} {:>10.1f} {:>10.3f} {:>8.3f} {:>7} {:>7} {:>9} "
                     "{:>16}\n",
                     name, p["initial_deployment"].get<std::string>(),
                     p["makespan_s"]["mean"].get<double>(), p["makespan_s"]["p99"].get<double>(),
                     p["samples_per_s"].get<double>(),
                     speedups.contains(name) ? speedups[name].get<double>() : 0.0,
                     p["reconfigurations"].get<int64_t>(), p["migrations"].get<int64_t>(), err,
                     solve);
}

std::string gen_table(const gen_scenario& sc, json& policies, json& timings,
                      const json& speedups) {
  std::string table =
    fmt::format("{:<14} {:>9} {:>10} {:>10} {:>10} {:>8} {:>7} {:>7} {:>9} {:>16}\n", "policy",
                "start", "mean s", "p99 s", "samples/s", "vs best", "reconf", "migr",
                "fcst err", "solve p50/max ms");
  for (auto& name : sc.policies)
    table += gen_table_row(name, policies[name], timings[name], speedups);
  return table;
}

} // namespace

caf::expected<gen_deployment> best_static_deployment(const gen_scenario& sc,
                                                     const std::string& out_dir) {
  auto sweep = sweep_statics(sc, engine_of(sc), true, out_dir);
  if (!sweep)
    return sweep.error();
  return sweep->best_deployment(sc.gpus);
}

namespace {

caf::expected<gen_replay_output> run_one_seed(const gen_scenario& sc, const std::string& out_dir) {
  const engine_model engine = engine_of(sc);
  auto want = [&](const char* p) {
    return std::find(sc.policies.begin(), sc.policies.end(), p) != sc.policies.end();
  };
  auto sweep = sweep_statics(sc, engine,
                             want("static-best") || want("planner-only")
                               || want("balancer-only") || want("orchestr"),
                             out_dir);
  if (!sweep)
    return sweep.error();
  const gen_deployment best = sweep->best_deployment(sc.gpus);
  json policies = json::object();
  json timings = json::object();
  for (auto& name : sc.policies) {
    if (name == "static-best" || name == "static-tp8") {
      policies[name] = static_policy(sc, name, *sweep, timings);
      continue;
    }
    auto p = adaptive_policy(sweep->best_dealt(sc), name, best,
                             (std::filesystem::path{out_dir} / "store" / name).string(), timings);
    if (!p)
      return p.error();
    policies[name] = std::move(*p);
  }
  auto speedups = speedups_of(policies);
  gen_replay_output out;
  out.report_json = gen_report(sc, policies, speedups).dump(2) + "\n";
  out.timings_json = json{{"scenario", sc.name}, {"policies", timings}}.dump(2) + "\n";
  out.summary = gen_table(sc, policies, timings, speedups);
  if (auto err = write_report_files(out_dir, out.report_json, out.timings_json))
    return err;
  return out;
}

/// One full report per seed under DIR/seed-N; DIR's report gives each policy's figures as the
/// mean over the seeds, and their mean, min and max under across_seeds.
caf::expected<gen_replay_output> run_seeds(const gen_scenario& sc, const std::string& out_dir) {
  std::vector<ordered_json> reports, timings;
  for (auto seed : sc.seeds) {
    auto made = make_seed_dir(out_dir, seed);
    if (!made)
      return made.error();
    const auto& dir = *made;
    auto run = run_one_seed(with_seed(sc, seed), dir);
    if (!run)
      return run.error();
    reports.push_back(ordered_json::parse(run->report_json));
    timings.push_back(ordered_json::parse(run->timings_json));
  }
  const std::vector<std::string> skip{"figures", "initial_deployment", "remaining_curve"};
  ordered_json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  report["seeds"] = sc.seeds;
  report["deployment"] = reports.front()["deployment"];
  report["workload"] = reports.front()["workload"];
  auto policies = spread_across(reports, "/policies", skip);
  auto speedups = spread_across(reports, "/throughput_vs_static_best");
  report["policies"] = means_of(policies);
  report["throughput_vs_static_best"] = means_of(speedups);
  report["across_seeds"] = {{"policies", policies}, {"throughput_vs_static_best", speedups}};
  if (sc.paper)
    report["paper"] = paper_json(*sc.paper);
  ordered_json per_seed = ordered_json::array();
  for (size_t i = 0; i < reports.size(); ++i)
    per_seed.push_back({{"seed", sc.seeds[i]},
                        {"report", seed_report_dir(sc.seeds[i]) + "/report.json"},
                        {"throughput_vs_static_best", reports[i]["throughput_vs_static_best"]}});
  report["per_seed"] = per_seed;
  gen_replay_output out;
  out.report_json = report.dump(2) + "\n";
  out.timings_json = means_of(spread_across(timings, "/policies")).dump(2) + "\n";
  out.summary = fmt::format("means over {} seeds; throughput vs static-best, mean (min-max):\n",
                            sc.seeds.size());
  for (auto& name : sc.policies) // report order
    if (speedups.contains(name)) {
      auto& s = speedups[name];
      out.summary += fmt::format("  {:<14} {:.3f} ({:.3f}-{:.3f})\n", name,
                                 s["mean"].get<double>(), s["min"].get<double>(),
                                 s["max"].get<double>());
    }
  if (auto err = write_report_files(out_dir, out.report_json, out.timings_json))
    return err;
  return out;
}

} // namespace

caf::expected<gen_replay_output> run_gen_replay(const gen_scenario& sc,
                                                const std::string& out_dir) {
  return replay_by_seeds(sc, out_dir, run_one_seed, run_seeds);
}

} // namespace loom::replay
