#include "replay/weave_replay.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "replay/baselines.hpp"
#include "replay/driver.hpp"
#include "replay/report.hpp"
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
      if (r.event != cluster_event::left && r.event != cluster_event::drifted)
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
  if (policy == "random")
    return random_chooser(seed);
  if (policy == "greedy")
    return greedy_chooser();
  return {};
}

/// One policy through the real scheduler and executors on the virtual clock, wired as `serve`
/// wires them: the scheduler works through the worker edge (here the simulated frameworks),
/// which is connected to the scheduler before anything arrives.
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
    auto frameworks = sys.spawn(sim_frameworks, sc.config, sc.jobs, sc.lengths, sc.seed, ledger,
                                1.0);
    cluster_scheduler_config cfg{sc.config.cluster, sc.config.policy.weave, sc.migrate_tails,
                                 false, chooser_for(policy, sc.seed), {}};
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
  out["phase_overruns"] = log.overruns;
  out["figures"] = weave_series(log.cluster, log.iterations, start);
  out["figures"]["group_gantt"] = group_gantt(log.ledger.activities);
  return out;
}

namespace {

ordered_json cost_ratios(const ordered_json& policies) {
  auto ratio = [&](const char* a, const char* b) -> ordered_json {
    if (!policies.contains(a) || !policies.contains(b) || !policies[a].contains("cost_per_hour_avg")
        || !policies[b].contains("cost_per_hour_avg"))
      return nullptr;
    double y = policies[b]["cost_per_hour_avg"].get<double>();
    return y > 0 ? ordered_json(round4(policies[a]["cost_per_hour_avg"].get<double>() / y))
                 : ordered_json(nullptr);
  };
  return {{"solo-d/weave", ratio("solo-d", "weave")},
          {"colocated/weave", ratio("colocated", "weave")},
          {"weave/optimal", ratio("weave", "optimal")},
          {"random/optimal", ratio("random", "optimal")},
          {"greedy/optimal", ratio("greedy", "optimal")}};
}

} // namespace

caf::expected<weave_replay_output> run_weave_replay(const weave_scenario& sc,
                                                    const std::string& out_dir) {
  if (auto err = make_output_dir(out_dir))
    return err;
  ordered_json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  report["workload"] = workload_json(sc);
  ordered_json timings;
  ordered_json policies = ordered_json::object();
  const double start = sc.jobs.empty() ? 0 : sc.jobs.front().arrival_s;
  std::optional<policy_log> weave_log;
  double weave_end = start;
  for (auto& policy : sc.policies) {
    auto t0 = std::chrono::steady_clock::now();
    if (policy == "colocated") {
      policies[policy] = run_colocated(sc, start);
    } else if (policy == "optimal") {
      policies[policy] = weave_log ? run_optimal(sc, weave_log->cluster, start, weave_end)
                                   : ordered_json{{"error", "needs the weave policy in the same "
                                                            "scenario"}};
    } else {
      auto log = run_policy(sc, policy, (std::filesystem::path{out_dir} / "store" / policy).string());
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
  weave_replay_output out;
  out.report_json = report.dump(2) + "\n";
  out.timings_json = ordered_json{{"scenario", sc.name}, {"policies", timings}}.dump(2) + "\n";
  out.summary = summary_table(policies, timings);
  if (auto err = write_report_files(out_dir, out.report_json, out.timings_json))
    return err;
  return out;
}

} // namespace loom::replay
