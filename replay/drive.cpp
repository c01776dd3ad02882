#include "replay/drive.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <filesystem>
#include <thread>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/type_registry.hpp"
#include "replay/report.hpp"
#include "replay/wire_edge.hpp"
#include "scheduler/cluster_scheduler.hpp"

namespace loom::replay {

namespace {

std::string toml_nodes(const char* pool, const std::vector<node>& nodes) {
  std::string out;
  for (auto& n : nodes)
    out += fmt::format("[[cluster.{}]]\nid = \"{}\"\ngpu = \"{}\"\ngpus = {}\nhost_memory_gb = {}\n\n",
                       pool, n.id, n.gpu, n.gpus, n.host_memory_gb);
  return out;
}

std::string toml_gpus(const cluster& c) {
  std::string out;
  for (auto& g : c.gpus)
    out += fmt::format("[cluster.gpus.{}]\nbf16_tflops = {}\nhbm_gb = {}\nhbm_tbps = {}\n"
                       "nvlink_gbps = {}\ncost_per_gpu_hour = {}\n\n",
                       g.name, g.bf16_tflops, g.hbm_gb, g.hbm_tbps, g.nvlink_gbps,
                       g.cost_per_gpu_hour);
  return out;
}

std::string toml_weave_policy(const weave_policy& p) {
  return fmt::format("[policy.weave]\ntail_migration_threshold = {}\nmax_group_size = {}\n"
                     "default_slo = {}\nwarm_start_gbps_per_gpu = {}\ncold_start_init_s = {}\n"
                     "cold_start_gbps = {}\ntail_migration_cost_s = {}\n"
                     "topology_aware_sync = {}\nintra_cluster_gbps = {}\noverrun_factor = {}\n"
                     "stuck_factor = {}\nadmission_bound = \"{}\"\ndrift_margin = {}\n"
                     "consolidate = {}\n",
                     p.tail_migration_threshold, p.max_group_size, p.default_slo,
                     p.warm_start_gbps_per_gpu, p.cold_start_init_s, p.cold_start_gbps,
                     p.tail_migration_cost_s, p.topology_aware_sync, p.intra_cluster_gbps,
                     p.overrun_factor, p.stuck_factor, p.admission_bound, p.drift_margin,
                     p.consolidate);
}

/// Every job's last state ended it, and no arrival, crash or resubmission is still due.
bool finished(drive_context& ctx, const weave_scenario& sc, double sim_s) {
  double last_event = 0;
  for (auto& a : sc.jobs)
    last_event = std::max(last_event, a.fail_after_s >= 0
                                        ? a.arrival_s + a.fail_after_s + a.recovery_s
                                        : a.arrival_s);
  if (sim_s <= last_event)
    return false;
  std::lock_guard<std::mutex> lock{ctx.mutex};
  for (auto& a : sc.jobs) {
    auto it = ctx.last_state.find(a.job.id);
    if (it == ctx.last_state.end() || it->second == job_state::placed
        || placed_again(it->second))
      return false;
  }
  return true;
}

std::shared_ptr<drive_context> make_context(const weave_scenario& sc, const drive_options& o) {
  auto ctx = std::make_shared<drive_context>();
  ctx->admin = drive_client_options(o, admin_key_prefix(o));
  ctx->worker = drive_client_options(o, o.key);
  ctx->config = sc.config;
  ctx->time_scale = o.time_scale;
  ctx->pools = std::make_shared<placement_engine>(
    make_placement_engine(sc.config.cluster, sc.config.policy.weave, sc.migrate_tails));
  return ctx;
}

/// Runs the frameworks against the service until the workload is done (or the limit).
caf::error drive_workload(const weave_scenario& sc, const drive_options& o,
                          std::shared_ptr<drive_context> ctx, sim_ledger& ledger_out) {
  caf::actor_system_config cfg;
  register_loom_types(cfg);
  caf::actor_system sys{cfg};
  ctx->origin = sys.clock().now().time_since_epoch();
  auto ledger = std::make_shared<sim_ledger>();
  auto frameworks = sys.spawn(sim_frameworks, sc.config, sc.jobs, length_draws_of(sc), ledger,
                              o.time_scale);
  auto scheduler = sys.spawn(wire_scheduler, ctx, frameworks);
  caf::anon_send(frameworks, connect_atom::value,
                 caf::actor_cast<cluster_scheduler_actor>(scheduler));
  auto t0 = std::chrono::steady_clock::now();
  caf::error failed;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
    double real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (finished(*ctx, sc, real_s * o.time_scale))
      break;
    if (real_s > o.limit_s) {
      failed = make_error(errc::invalid_argument,
                          fmt::format("the workload did not finish within {} s", o.limit_s));
      break;
    }
  }
  caf::anon_send_exit(frameworks, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  sys.await_all_actors_done();
  ledger_out = *ledger;
  return failed;
}

} // namespace

drive_lag measure_lag(std::vector<double> lag_s, const weave_scenario& sc) {
  drive_lag out;
  double shortest = std::numeric_limits<double>::infinity();
  for (auto& a : sc.jobs)
    shortest = std::min({shortest, a.job.rollout_s, a.job.training_s});
  out.budget_s = std::isfinite(shortest) ? shortest / 20 : 0;
  out.count = lag_s.size();
  if (lag_s.empty())
    return out;
  std::sort(lag_s.begin(), lag_s.end());
  auto at = [&](double q) { return lag_s[size_t(q * double(lag_s.size() - 1) + 0.5)]; };
  out.p50_s = at(0.5);
  out.p99_s = at(0.99);
  out.max_s = lag_s.back();
  return out;
}

client_options drive_client_options(const drive_options& o, const std::string& prefix) {
  client_options c;
  c.endpoint = o.endpoint;
  c.timeout = no_timeout;
  if (o.server_key.empty())
    return c;
  c.server_public_key = read_key(o.server_key);
  c.public_key = read_key(prefix + ".pub");
  c.secret_key = read_key(prefix + ".secret");
  return c;
}

std::string admin_key_prefix(const drive_options& o) {
  return o.admin_key.empty()
           ? (std::filesystem::path{o.server_key}.parent_path() / "admin").string()
           : o.admin_key;
}

caf::expected<drive_output> run_drive(const weave_scenario& sc, const drive_options& o) {
  if (!sc.migrate_tails)
    return make_error(errc::invalid_config, "loom drive needs tail migration on (the service "
                                            "always migrates tails)");
  if (sc.profiled)
    return make_error(errc::invalid_config, "loom drive does not follow a job the service places "
                                            "again, as a profiled job is after its profiling "
                                            "pass: replay a profiled scenario");
  if (auto err = make_output_dir(o.out_dir))
    return err;
  auto ctx = make_context(sc, o);
  sim_ledger ledger;
  auto wall0 = std::chrono::steady_clock::now();
  if (auto err = drive_workload(sc, o, ctx, ledger))
    return err;
  auto& log = ctx->log;
  log.ledger = ledger;
  std::sort(log.cluster.begin(), log.cluster.end(),
            [](auto& a, auto& b) { return a.time_ns < b.time_ns; });
  const double start = sc.jobs.empty() ? 0 : sc.jobs.front().arrival_s;
  double end = start;
  auto weave = policy_json(sc, log, start, end);
  weave.erase("phase_overruns"); // the service counts them (loom_phase_overruns_total)
  ordered_json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  report["workload"] = workload_json(sc);
  report["policies"] = ordered_json{{"weave", weave}};
  report["drive"] = {
    {"endpoint", o.endpoint},
    {"time_scale", o.time_scale},
    {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()},
    {"wire_errors", ctx->wire_errors.load()}};
  drive_lag lag;
  {
    std::lock_guard<std::mutex> lock{ctx->mutex};
    lag = measure_lag(ctx->release_lag_s, sc);
  }
  report["drive"]["lag_s"] = {{"releases", lag.count}, {"p50", round4(lag.p50_s)},
                              {"p99", round4(lag.p99_s)}, {"max", round4(lag.max_s)},
                              {"budget", round4(lag.budget_s)}};
  report["drive"]["lagging"] = lag.lagging();
  drive_output out;
  out.report_json = report.dump(2) + "\n";
  out.summary = summary_table(report["policies"], ordered_json::object());
  out.summary += fmt::format("lag behind simulated time per phase release: p50 {:.3f} s, p99 "
                             "{:.3f} s, max {:.3f} s (budget {:.3f} s)\n",
                             lag.p50_s, lag.p99_s, lag.max_s, lag.budget_s);
  if (lag.lagging()) {
    out.summary += fmt::format("warning: the drive lagged simulated time by more than its budget "
                               "(p99 {:.3f} s > {:.3f} s); its SLOs and packings may differ from "
                               "replay's for that reason alone: lower --time-scale (was {})\n",
                               lag.p99_s, lag.budget_s, o.time_scale);
    spdlog::warn("event=drive_lagging p99_s={:.3f} budget_s={:.3f} time_scale={}", lag.p99_s,
                 lag.budget_s, o.time_scale);
  }
  if (auto err = write_report_files(o.out_dir, out.report_json, "{}\n"))
    return err;
  return out;
}

caf::expected<std::string> serve_config_text(const weave_scenario& sc, const std::string& storage,
                                             const std::string& gateway,
                                             const std::string& driver_key_file) {
  const auto& c = sc.config.cluster;
  std::string text = fmt::format(
    "# A service for `loom drive` of scenario '{}': its cluster and WEAVE policy.\n"
    "[service]\nname = \"drive-{}\"\n\n[endpoints]\ngateway = \"{}\"\nmetrics = "
    "\"127.0.0.1:0\"\n\n[storage]\npath = \"{}\"\n\n[cluster]\nname = \"{}\"\n"
    "cross_link_gbps = {}\n\n",
    sc.name, sc.name, gateway, storage, c.name, c.cross_link_gbps);
  text += toml_gpus(c) + toml_nodes("rollout", c.rollout) + toml_nodes("training", c.training);
  text += toml_weave_policy(sc.config.policy.weave);
  if (!driver_key_file.empty())
    text += fmt::format("\n[security.clients]\ndriver = [\"{}\"]\n",
                        std::filesystem::absolute(driver_key_file).string());
  return text;
}

} // namespace loom::replay
