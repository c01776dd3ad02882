// loom: the control plane for disaggregated RL post-training clusters.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <string_view>
#include <optional>

#include "app/logging.hpp"
#include "app/serve.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "drivers/tl1_server.hpp"
#include "app/admin.hpp"
#include "replay/fabric_replay.hpp"
#include "replay/gen_replay.hpp"
#include "replay/scenario_file.hpp"
#include "replay/weave_replay.hpp"

namespace {

constexpr int exit_config_error = 2;

/// Loads the config named on the command line, or the embedded defaults when none is.
loom::config_result load(const std::string& path) {
  if (path.empty())
    return loom::parse_config(loom::embedded_config_text(), "<embedded conf/loom.toml>");
  return loom::load_config_file(path);
}

void print_errors(const std::vector<loom::config_error>& errors, const char* what) {
  for (auto& e : errors)
    std::fprintf(stderr, "%s\n", e.to_string().c_str());
  std::fprintf(stderr, "%zu error%s in %s\n", errors.size(), errors.size() == 1 ? "" : "s", what);
}

/// Runs a loaded scenario and prints its table; the exit code.
template <class Scenario, class Runner>
int run_scenario(const Scenario& sc, size_t items, const char* item_name, Runner run,
                 const std::string& out_dir) {
  std::printf("scenario %s (seed %llu): %zu %s, policies:", sc.name.c_str(),
              static_cast<unsigned long long>(sc.seed), items, item_name);
  for (auto& p : sc.policies)
    std::printf(" %s", p.c_str());
  std::printf("\n");
  std::fflush(stdout);
  auto out = run(sc, out_dir);
  if (!out) {
    std::fprintf(stderr, "replay failed: %s\n", loom::render(out.error()).c_str());
    return 1;
  }
  std::printf("%s", out->summary.c_str());
  std::printf("report: %s/report.json, timings: %s/timings.json\n", out_dir.c_str(),
              out_dir.c_str());
  return 0;
}

std::optional<loom::log_level> parse_level(const std::string& s) {
  for (auto l : {loom::log_level::trace, loom::log_level::debug, loom::log_level::info,
                 loom::log_level::warn, loom::log_level::error})
    if (loom::to_string(l) == s)
      return l;
  return std::nullopt;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Loom: control plane for disaggregated RL post-training clusters.\n"
               "Packs RL jobs into co-execution groups (WEAVE), plans generation parallelism\n"
               "(OrchestrRL) and reshapes optical fabrics (RFabric, mFabric, Opus)."};
  app.set_version_flag("--version", "loom " LOOM_VERSION);
  app.require_subcommand(1);

  std::string serve_config;
  std::string serve_level;
  auto* serve_cmd = app.add_subcommand(
    "serve", "Run the Loom service for one cluster in the foreground until SIGINT/SIGTERM:\n"
             "opens RocksDB storage, serves Prometheus /metrics, hosts the actors.");
  serve_cmd->add_option("-c,--config", serve_config,
                        "Config file (TOML); default: the embedded conf/loom.toml")
    ->check(CLI::ExistingFile);
  serve_cmd->add_option("--log-level", serve_level, "Override the config's log level")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));

  std::string keygen_name;
  std::string keygen_dir = "keys";
  auto* keygen_cmd = app.add_subcommand(
    "keygen", "Write a CURVE key pair NAME.pub / NAME.secret (Z85) for the gateway's clients or\n"
              "the service; list the .pub in the config's [security.clients] for its role.");
  keygen_cmd->add_option("name", keygen_name, "Key name")->required();
  keygen_cmd->add_option("--out", keygen_dir, "Directory")->capture_default_str();

  // Admin commands against a running serve (same config, for the endpoint and keys).
  loom::admin_request admin;
  std::string admin_config;
  std::vector<CLI::App*> admin_cmds;
  auto add_admin = [&](const char* name, const char* help, const char* arg) {
    auto* cmd = app.add_subcommand(name, help);
    if (arg)
      cmd->add_option(arg, admin.argument, arg)->required();
    cmd->add_option("-c,--config", admin_config,
                    "The service's config (endpoint, keys); default: embedded conf/loom.toml")
      ->check(CLI::ExistingFile);
    cmd->add_flag("--json", admin.json, "JSON for scripts");
    cmd->add_option("--key", admin.key,
                    "Admin key pair prefix (PREFIX.pub, PREFIX.secret); default: the "
                    "service's local admin key");
    cmd->add_option("--timeout-ms", admin.timeout_ms, "How long to wait")->capture_default_str();
    admin_cmds.push_back(cmd);
  };
  add_admin("submit", "Submit an RL job (a job TOML file) to a running serve.", "file");
  add_admin("jobs", "List jobs and their states.", nullptr);
  add_admin("groups", "List co-execution groups.", nullptr);
  add_admin("job", "Show one job.", "id");
  add_admin("cancel", "Cancel a job: it leaves its group, the others go on.", "id");
  add_admin("fabric", "List committed circuit plans.", nullptr);

  std::string check_path;
  auto* check_cmd = app.add_subcommand(
    "check-config", "Validate a config file without starting anything; prints every error as\n"
                    "FILE:LINE:COL: KEY: MESSAGE and exits 2 if there is any.");
  check_cmd->add_option("file", check_path, "Config file; default: the embedded conf/loom.toml");

  loom::ocs_emulator_options emu;
  std::string emu_size = "32x32";
  std::string emu_level = "info";
  std::vector<uint32_t> emu_failed;
  int64_t emu_delay_ms = 0;
  auto* emu_cmd = app.add_subcommand(
    "ocs-emu", "Run a TL1 optical circuit switch emulator (Polatis dialect) on TCP until\n"
               "SIGINT/SIGTERM: inputs 1..N, outputs N+1..N+M, many concurrent sessions.\n"
               "For tests and demos; third-party TL1 clients of this dialect can drive it.");
  emu_cmd->add_option("--port", emu.port, "TCP port; 0 picks a free one (logged)")
    ->capture_default_str();
  emu_cmd->add_option("--bind", emu.bind, "Address to listen on")->capture_default_str();
  emu_cmd->add_option("--size", emu_size, "Switch size NxM")->capture_default_str();
  emu_cmd->add_option("--delay-ms", emu_delay_ms, "Switching time of each ENT/DLT-PATCH")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  emu_cmd->add_option("--user", emu.switch_options.user, "Login user")->capture_default_str();
  emu_cmd->add_option("--password", emu.switch_options.password, "Login password")
    ->capture_default_str();
  emu_cmd->add_option("--fail-port", emu_failed, "Fault: a failed port (repeatable)");
  emu_cmd->add_option("--drop-after", emu.drop_after,
                      "Fault: after N changes, make the next one and drop its session unanswered");
  emu_cmd->add_flag("--hang", emu.hang, "Fault: accept sessions and commands, never answer");
  emu_cmd->add_option("--max-sessions", emu.max_sessions, "Concurrent sessions")
    ->capture_default_str();
  emu_cmd->add_option("--log-level", emu_level, "Log level")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
    ->capture_default_str();

  std::string replay_path;
  std::string replay_out = "replay-out";
  std::string replay_level = "warn";
  auto* replay_cmd = app.add_subcommand(
    "replay", "Run a scenario on the virtual clock, once per policy it lists: the same\n"
              "actors as `serve` (WEAVE scheduler and executors, the generation planner\n"
              "and balancer, or the fabric controller) against simulated frameworks,\n"
              "engines or OCS devices. Writes\n"
              "DIR/report.json (byte-identical for the same scenario and seed),\n"
              "DIR/timings.json (wall-clock figures) and DIR/store/POLICY (RocksDB).");
  replay_cmd->add_option("scenario", replay_path, "Scenario file (TOML)")
    ->required()
    ->check(CLI::ExistingFile);
  replay_cmd->add_option("--out", replay_out, "Output directory")->capture_default_str();
  replay_cmd->add_option("--log-level", replay_level, "Log level")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
    ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  if (*replay_cmd) {
    loom::setup_logging(*parse_level(replay_level));
    if (loom::replay::scenario_kind(replay_path) == "fabric") {
      auto scenario = loom::replay::load_fabric_scenario(replay_path);
      if (!scenario.value) {
        print_errors(scenario.errors, "scenario");
        return exit_config_error;
      }
      return run_scenario(*scenario.value, scenario.value->policies.size(), "sections",
                          loom::replay::run_fabric_replay, replay_out);
    }
    if (loom::replay::scenario_kind(replay_path) == "generation") {
      auto scenario = loom::replay::load_gen_scenario(replay_path);
      if (!scenario.value) {
        print_errors(scenario.errors, "scenario");
        return exit_config_error;
      }
      return run_scenario(*scenario.value, scenario.value->steps.size(), "steps",
                          loom::replay::run_gen_replay, replay_out);
    }
    auto scenario = loom::replay::load_weave_scenario(replay_path);
    if (!scenario.value) {
      print_errors(scenario.errors, "scenario");
      return exit_config_error;
    }
    return run_scenario(*scenario.value, scenario.value->jobs.size(), "jobs",
                        loom::replay::run_weave_replay, replay_out);
  }

  if (*emu_cmd) {
    uint32_t n = 0;
    uint32_t m = 0;
    auto x = emu_size.find('x');
    auto number = [](std::string_view text, uint32_t& out) {
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
      return ec == std::errc{} && ptr == text.data() + text.size();
    };
    if (x == std::string::npos || !number(std::string_view{emu_size}.substr(0, x), n)
        || !number(std::string_view{emu_size}.substr(x + 1), m) || n == 0 || m == 0
        || n + m > 4096) {
      std::fprintf(stderr, "--size: '%s' is not NxM with N, M >= 1 and N + M <= 4096\n",
                   emu_size.c_str());
      return exit_config_error;
    }
    emu.switch_options.size = {n, m};
    emu.switch_options.failed_ports.insert(emu_failed.begin(), emu_failed.end());
    emu.delay = std::chrono::milliseconds{emu_delay_ms};
    loom::setup_logging(*parse_level(emu_level));
    return loom::run_ocs_emulator(emu);
  }

  if (*keygen_cmd)
    return loom::run_keygen(keygen_name, keygen_dir);

  for (auto* cmd : admin_cmds)
    if (*cmd) {
      auto result = load(admin_config);
      if (!result.value) {
        print_errors(result.errors, "config");
        return exit_config_error;
      }
      loom::setup_logging(loom::log_level::warn);
      admin.command = cmd->get_name();
      return loom::run_admin(*result.value, admin);
    }

  if (*check_cmd) {
    auto result = load(check_path);
    if (!result.value) {
      print_errors(result.errors, "config");
      return exit_config_error;
    }
    auto& c = *result.value;
    std::printf("%s: ok: cluster '%s', %zu rollout nodes (%d GPUs, $%.2f/h), %zu training nodes "
                "(%d GPUs, $%.2f/h), fabric %s with %zu ToRs, %zu OCS, %zu links\n",
                c.source.c_str(), c.cluster.name.c_str(), c.cluster.rollout.size(),
                c.cluster.total_gpus(loom::pool_kind::rollout),
                c.cluster.cost_per_hour(loom::pool_kind::rollout), c.cluster.training.size(),
                c.cluster.total_gpus(loom::pool_kind::training),
                c.cluster.cost_per_hour(loom::pool_kind::training),
                std::string{loom::to_string(c.fabric.kind)}.c_str(), c.fabric.tors.size(),
                c.fabric.ocs.size(), c.fabric.links.size());
    return 0;
  }

  if (*serve_cmd) {
    auto result = load(serve_config);
    if (!result.value) {
      print_errors(result.errors, "config");
      return exit_config_error;
    }
    auto level = result.value->level;
    if (!serve_level.empty())
      level = *parse_level(serve_level);
    loom::setup_logging(level);
    return loom::serve(*result.value);
  }
  return 0;
}
