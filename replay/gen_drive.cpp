#include "replay/gen_drive.hpp"

#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "protocol/error.hpp"
#include "replay/engine_fleet.hpp"
#include "replay/gen_replay.hpp"
#include "replay/report.hpp"
#include "replay/rl_step_clock.hpp"

namespace loom::replay {

namespace {

using json = nlohmann::json;
using wall = std::chrono::system_clock;

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(wall::now().time_since_epoch())
    .count();
}

std::string deployment_toml(const deployment_config& d, double time_scale) {
  return fmt::format(
    "[[generation.deployments]]\nname = \"{}\"\nmodel = \"{}\"\ngpu = \"{}\"\ngpus = {}\n"
    "gpus_per_node = {}\ninitial = \"{}\"\nmax_tokens = {}\nplanner = {}\nbalancer = {}\n"
    "period_s = {}\ntick_ms = {}\nhistogram_bin_tokens = {}\nforecast_window = {}\n"
    "epsilon_s = {}\ntheta = {}\nkv_balance_delta = {}\nweight_load_gbps = {}\n"
    "engine_restart_s = {}\nstandby_restart_s = {}\nkv_nic_gbps = {}\nkv_nics = {}\n",
    d.name, d.model, d.gpu, d.gpus, d.planner.gpus_per_node, d.initial.name(), d.max_tokens,
    d.planner_enabled, d.balancer_enabled, d.period_s / time_scale,
    d.tick_s * 1e3 / time_scale, d.bin_tokens, d.forecast_window, d.planner.epsilon_s,
    d.balancer.theta, d.planner.kv_balance_delta, d.planner.weight_load_gbps,
    d.planner.engine_restart_s, d.planner.standby_restart_s, d.planner.kv_path.nic_gbps,
    d.planner.kv_path.nics)
         + fmt::format("memory_utilization = {}\ndispatch = \"{}\"\n", d.memory_utilization,
                       to_string(d.dispatch))
         + (d.profile_path.empty() ? "" : fmt::format("profile = \"{}\"\n", d.profile_path));
}

/// The framework's router: starts each step, waits for the service's StepDone, and starts
/// the next one after the trainer's share (synchronous) or with it (one step asynchronous:
/// rl_step_clock). Makespans are in engine time (the wall clock times time_scale).
class wire_router {
public:
  wire_router(const gen_scenario& sc, const drive_options& o, engine_fleet& fleet)
    : sc_(sc), o_(o), fleet_(fleet), client_(drive_client_options(o, o.key)) {}

  caf::error run(gen_run_log& log, const parallel_config& initial) {
    t0_ = std::chrono::steady_clock::now();
    if (auto err = register_router())
      return err;
    if (auto err = await_engines(initial))
      return err;
    rl_step_clock trainer{sc_.training_s, sc_.off_policy_steps}; // engine seconds from origin
    const int64_t origin = wall_ns();
    auto engine_s = [&](int64_t ns) { return double(ns - origin) / 1e9 * o_.time_scale; };
    for (uint64_t step = 0; step < sc_.steps.size(); ++step) {
      const int64_t start = wall_ns();
      log.step_starts.push_back(engine_s(start));
      auto last = run_step(step);
      if (!last)
        return last.error();
      log.makespans.push_back(engine_s(*last) - engine_s(start));
      auto resume = origin + int64_t(trainer.step_ended(engine_s(*last)) / o_.time_scale * 1e9);
      if (resume > wall_ns())
        std::this_thread::sleep_for(std::chrono::nanoseconds{resume - wall_ns()});
    }
    log.done = true;
    return caf::none;
  }

private:
  caf::error check_limits() {
    if (fleet_.exited() > 0)
      return make_error(errc::unavailable, "an engine process exited (see its log)");
    auto real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (real_s > o_.limit_s)
      return make_error(errc::unavailable,
                        fmt::format("the workload did not finish within {} s", o_.limit_s));
    return caf::none;
  }

  caf::error register_router() {
    for (;;) {
      auto r = client_.register_router("drive-router", sc_.name);
      if (r && r->has_registered())
        return caf::none;
      if (r && r->has_error())
        return make_error(errc::unavailable, r->error().message());
      if (auto err = check_limits())
        return err;
    }
  }

  /// Replay's engines are all up before its first step: so are the drive's.
  caf::error await_engines(const parallel_config& initial) {
    const int instances = sc_.gpus / initial.gpus();
    auto opt = drive_client_options(o_, admin_key_prefix(o_));
    opt.timeout = std::chrono::seconds{5};
    client admin{opt};
    for (;;) {
      v1::Envelope e;
      e.mutable_list_generation();
      if (auto r = admin.call(e); r && r->has_generation_list())
        for (auto& d : r->generation_list().deployments())
          if (d.deployment() == sc_.name && d.instances_size() == instances && d.phase().empty()
              && d.engines_size() * engine_gpus(sc_) == sc_.gpus)
            return caf::none;
      if (auto err = check_limits())
        return err;
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
  }

  /// The step's latest finish (engines' wall clock).
  caf::expected<int64_t> run_step(uint64_t step) {
    v1::StepStart m;
    m.set_deployment(sc_.name);
    m.set_step(step);
    for (size_t i = 0; i < sc_.steps[step].size(); ++i) {
      auto* r = m.add_requests();
      r->set_request(request_id(step, i));
      r->set_prompt_tokens(sc_.steps[step][i].prompt_tokens);
    }
    for (;;) {
      auto placed = client_.start_step(m);
      if (!placed)
        return make_error(errc::unavailable,
                          fmt::format("step {}: {}", step, placed.error.message));
      if (placed->done())
        return placed->last_finished_at_ns();
      // The StepDone, which a re-registration brings again; a frame lost on a link that
      // never dropped the session is caught by asking again now and then.
      for (auto again = std::chrono::steady_clock::now() + ask_again;
           std::chrono::steady_clock::now() < again;) {
        if (auto cmd = client_.next_command(std::chrono::milliseconds{200}))
          if (cmd->has_step_done() && cmd->step_done().step() == step)
            return cmd->step_done().last_finished_at_ns();
        if (auto err = check_limits())
          return err;
      }
    }
  }

  static constexpr auto ask_again = std::chrono::seconds{10};

  const gen_scenario& sc_;
  const drive_options& o_;
  engine_fleet& fleet_;
  client client_;
  std::chrono::steady_clock::time_point t0_;
};

std::vector<std::vector<std::string>> engine_commands(const gen_scenario& sc, const drive_options& o,
                                                      const std::string& scenario_path,
                                                      const parallel_config& initial) {
  std::vector<std::vector<std::string>> out;
  const int gpus = engine_gpus(sc);
  for (int i = 0; i < sc.gpus / gpus; ++i) {
    std::vector<std::string> argv{o.engine_binary.empty() ? default_engine_binary()
                                                          : o.engine_binary,
                                  "--endpoint",   o.endpoint,
                                  "--deployment", sc.name,
                                  "--engine-id",  fmt::format("engine-{}", i),
                                  "--node",       fmt::format("gen-{}", i),
                                  "--gpus",       std::to_string(gpus),
                                  "--scenario",   scenario_path,
                                  "--config",     initial.name(),
                                  "--time-scale", fmt::format("{}", o.time_scale)};
    if (!o.server_key.empty())
      argv.insert(argv.end(), {"--server-key", o.server_key, "--key", o.engine_key});
    out.push_back(std::move(argv));
  }
  return out;
}

/// The service's counters for the deployment (admin ListGeneration).
void read_counters(const gen_scenario& sc, const drive_options& o, gen_run_log& log,
                   json& recent) {
  auto opt = drive_client_options(o, admin_key_prefix(o));
  opt.timeout = std::chrono::seconds{10};
  client admin{opt};
  v1::Envelope e;
  e.mutable_list_generation();
  auto r = admin.call(e);
  if (!r || !r->has_generation_list())
    return;
  for (auto& d : r->generation_list().deployments())
    if (d.deployment() == sc.name) {
      log.reconfigurations = d.counters().reconfigurations();
      log.migrations = d.counters().migrations();
      log.kv_transfers = d.counters().kv_transfers();
      log.kv_recomputes = d.counters().kv_recomputes();
      recent = std::vector<std::string>(d.recent().begin(), d.recent().end());
    }
}

} // namespace

std::string gen_serve_config_text(const gen_scenario& sc, const parallel_config& initial,
                                  const std::string& storage, const std::string& gateway,
                                  const std::string& router_key_file,
                                  const std::string& engine_key_file, double time_scale) {
  const int gpus = engine_gpus(sc);
  std::string text = fmt::format(
    "# A service for `loom drive` of generation scenario '{}' at {}x: its deployment's\n"
    "# planning period and monitoring tick are divided by the time scale.\n"
    "[service]\nname = \"drive-{}\"\n\n[endpoints]\ngateway = \"{}\"\nmetrics = "
    "\"127.0.0.1:0\"\n\n[storage]\npath = \"{}\"\n\n[cluster]\nname = \"{}\"\n"
    "cross_link_gbps = 20\n\n[[cluster.rollout]]\nid = \"gen-{{0..{}}}\"\ngpu = \"{}\"\n"
    "gpus = {}\nhost_memory_gb = 1024\n\n[[cluster.training]]\nid = \"train-0\"\ngpu = \"{}\"\n"
    "gpus = {}\nhost_memory_gb = 1024\n\n",
    sc.name, time_scale, sc.name, gateway, storage, sc.name, sc.gpus / gpus - 1, sc.gpu.name,
    gpus, sc.gpu.name, gpus);
  text += deployment_toml(deployment_for(sc, initial, true, true), time_scale);
  if (!router_key_file.empty() || !engine_key_file.empty()) {
    auto list = [](const std::string& f) {
      return f.empty() ? std::string{"[]"}
                       : fmt::format("[\"{}\"]", std::filesystem::absolute(f).string());
    };
    text += fmt::format("\n[security.clients]\ngen-router = {}\ngen-instance = {}\n",
                        list(router_key_file), list(engine_key_file));
  } else {
    text += "\n[security]\ninsecure = true\n";
  }
  return text;
}

caf::expected<parallel_config> drive_initial(const gen_scenario& sc, const drive_options& o) {
  if (!o.initial.empty()) {
    auto c = parallel_config::parse(o.initial);
    if (!c)
      return make_error(errc::invalid_argument,
                        fmt::format("--initial: '{}' is not a parallel config", o.initial));
    return *c;
  }
  auto best = best_static_deployment(sc, o.out_dir);
  if (!best)
    return best.error();
  return best->parallel;
}

caf::expected<drive_output> run_gen_drive(const gen_scenario& sc, const drive_options& o) {
  if (auto err = make_output_dir(o.out_dir))
    return err;
  auto initial = drive_initial(sc, o);
  if (!initial)
    return initial.error();
  auto fleet = engine_fleet::start(engine_commands(sc, o, std::filesystem::absolute(sc.source),
                                                   *initial),
                                   o.out_dir);
  if (!fleet)
    return fleet.error();
  auto wall0 = std::chrono::steady_clock::now();
  gen_run_log log;
  wire_router router{sc, o, *fleet};
  auto failed = router.run(log, *initial);
  json recent = json::array();
  read_counters(sc, o, log, recent);
  auto codes = fleet->stop();
  if (failed)
    return failed;
  auto policy = gen_policy_json(sc, {*initial, sc.gpus / initial->gpus()}, log);
  for (auto key : {"preemptions", "forecast_rel_error", "forecast_mean_length_rel_error",
                   "timeline", "remaining_curve"})
    policy.erase(key); // the engines and the service keep these (events, metrics)
  policy["recent_decisions"] = recent;
  json report;
  report["scenario"] = sc.name;
  report["seed"] = sc.seed;
  report["policies"] = {{"orchestr", policy}};
  report["drive"] = {
    {"endpoint", o.endpoint},
    {"time_scale", o.time_scale},
    {"engines", codes.size()},
    {"engine_exit_codes", codes},
    {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()}};
  drive_output out;
  out.report_json = report.dump(2) + "\n";
  out.summary = fmt::format("orchestr live: {} steps, mean makespan {:.1f} s, {:.3f} samples/s, "
                            "{} reconfigurations, {} migrations\n",
                            log.makespans.size(), policy["makespan_s"]["mean"].get<double>(),
                            policy["samples_per_s"].get<double>(), log.reconfigurations,
                            log.migrations);
  if (auto err = write_report_files(o.out_dir, out.report_json, "{}\n"))
    return err;
  return out;
}

} // namespace loom::replay
