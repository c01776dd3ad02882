// `loom replay`, `loom ocs-emu` and the admin requests to a running serve.

#include <CLI/CLI.hpp>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdio>
#include <string_view>

#include "app/admin.hpp"
#include "app/commands.hpp"
#include "app/ha_status.hpp"
#include "app/logging.hpp"
#include "drivers/tl1_server.hpp"
#include "protocol/error.hpp"
#include "replay/fabric_replay.hpp"
#include "replay/gen_replay.hpp"
#include "replay/report_figures.hpp"
#include "replay/scenario_file.hpp"
#include "replay/weave_replay.hpp"

namespace loom {

namespace {

/// Runs a loaded scenario and prints its table; the exit code.
template <class Scenario, class Runner>
int run_scenario(const Scenario& sc, size_t items, const char* item_name, Runner run,
                 const std::string& out_dir) {
  std::string seeds = fmt::format("seed {}", sc.seed);
  if constexpr (requires { sc.seeds; })
    if (sc.seeds.size() > 1)
      seeds = fmt::format("seeds {}", fmt::join(sc.seeds, ", "));
  std::printf("scenario %s (%s): %zu %s, policies:", sc.name.c_str(), seeds.c_str(), items,
              item_name);
  for (auto& p : sc.policies)
    std::printf(" %s", p.c_str());
  std::printf("\n");
  std::fflush(stdout);
  auto out = run(sc, out_dir);
  if (!out) {
    std::fprintf(stderr, "replay failed: %s\n", render(out.error()).c_str());
    return 1;
  }
  std::printf("%s", out->summary.c_str());
  auto report = nlohmann::ordered_json::parse(out->report_json, nullptr, false);
  if (auto verdict = replay::verdict_of(report); !verdict.empty())
    std::printf("%s\n", verdict.c_str());
  std::printf("report: %s/report.html (%s/report.json), timings: %s/timings.json\n",
              out_dir.c_str(), out_dir.c_str(), out_dir.c_str());
  return 0;
}

/// Loads a scenario of one kind and runs it; a scenario with errors is exit code 2.
template <class Loader, class Runner, class Count>
int load_and_run(const std::string& path, Loader load, Count count, const char* item_name,
                 Runner run, const std::string& out_dir) {
  auto scenario = load(path);
  if (!scenario.value) {
    print_errors(scenario.errors, "scenario");
    return exit_config_error;
  }
  return run_scenario(*scenario.value, count(*scenario.value), item_name, run, out_dir);
}

class replay_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "replay", "Run a scenario on the virtual clock, once per policy it lists: the same\n"
                "actors as `serve` (WEAVE scheduler and executors, the generation planner\n"
                "and balancer, or the fabric controller) against simulated frameworks,\n"
                "engines or OCS devices. Writes\n"
                "DIR/report.json (byte-identical for the same scenario and seed),\n"
                "DIR/report.html (its figures, self-contained; `loom report` redraws it),\n"
                "DIR/timings.json (wall-clock figures) and DIR/store/POLICY (RocksDB).");
    cmd_->add_option("scenario", path_, "Scenario file (TOML)")->required()->check(CLI::ExistingFile);
    cmd_->add_option("--out", out_, "Output directory")->capture_default_str();
    add_log_level(*cmd_, level_, "Log level");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    setup_logging(level_named(level_));
    auto kind = replay::scenario_kind(path_);
    if (kind == "fabric")
      return load_and_run(path_, replay::load_fabric_scenario,
                          [](auto& sc) { return sc.policies.size(); }, "sections",
                          replay::run_fabric_replay, out_);
    if (kind == "generation")
      return load_and_run(path_, replay::load_gen_scenario,
                          [](auto& sc) { return sc.steps.size(); }, "steps",
                          replay::run_gen_replay, out_);
    return load_and_run(path_, replay::load_weave_scenario,
                        [](auto& sc) { return sc.jobs.size(); }, "jobs",
                        replay::run_weave_replay, out_);
  }

private:
  CLI::App* cmd_ = nullptr;
  std::string path_;
  std::string out_ = "replay-out";
  std::string level_ = "warn";
};

} // namespace

std::optional<switch_size> parse_switch_size(std::string_view text) {
  uint32_t n = 0;
  uint32_t m = 0;
  auto number = [](std::string_view s, uint32_t& out) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && ptr == s.data() + s.size();
  };
  auto x = text.find('x');
  if (x == std::string_view::npos || !number(text.substr(0, x), n)
      || !number(text.substr(x + 1), m) || n == 0 || m == 0 || n + m > 4096)
    return std::nullopt;
  return switch_size{n, m};
}

namespace {

class ocs_emu_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "ocs-emu", "Run a TL1 optical circuit switch emulator (Polatis dialect) on TCP until\n"
                 "SIGINT/SIGTERM: inputs 1..N, outputs N+1..N+M, many concurrent sessions.\n"
                 "For tests and demos; third-party TL1 clients of this dialect can drive it.");
    cmd_->add_option("--port", emu_.port, "TCP port; 0 picks a free one (logged)")
      ->capture_default_str();
    cmd_->add_option("--bind", emu_.bind, "Address to listen on")->capture_default_str();
    cmd_->add_option("--size", size_, "Switch size NxM")->capture_default_str();
    cmd_->add_option("--delay-ms", delay_ms_, "Switching time of each ENT/DLT-PATCH")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
    cmd_->add_option("--user", emu_.switch_options.user, "Login user")->capture_default_str();
    cmd_->add_option("--password", emu_.switch_options.password, "Login password")
      ->capture_default_str();
    cmd_->add_option("--patch", patches_,
                     "A cross-connect IN-OUT the switch carries from the start, as one that kept "
                     "its patches through a restart (repeatable)");
    cmd_->add_option("--framing", framing_,
                     "loom (each message ends ';' CR LF), or gr831: messages open with CR LF LF "
                     "and end with a bare ';', long replies continue over '>' messages, slow "
                     "commands are acknowledged IP, alarm lines take GR-833's layout, and the "
                     "switch sends autonomous REPT ALM messages")
      ->check(CLI::IsMember({"loom", "gr831"}))
      ->capture_default_str();
    cmd_->add_option("--lines-per-message", emu_.lines_per_message,
                     "gr831: data lines in a message before it continues with '>'")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
    cmd_->add_option("--autonomous-ms", autonomous_ms_,
                     "gr831: a REPT ALM EQPT message to each logged-in session this often "
                     "(0: none)")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}))
      ->capture_default_str();
    cmd_->add_option("--equipment-alarm", emu_.switch_options.equipment_alarms,
                     "An equipment alarm line RTRV-ALM-ALL reports, e.g. FAN-2,EQPT:MN,FANFLT,NSA "
                     "(repeatable)");
    cmd_->add_option("--logout-every-ms", logout_ms_,
                     "Fault: log every logged-in session out this often, keeping its TCP "
                     "connection (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}))
      ->capture_default_str();
    cmd_->add_option("--fail-port", failed_, "Fault: a failed port (repeatable)");
    cmd_->add_option("--fail-after-ms", fail_after_ms_,
                     "Fault: the --fail-port ports fail this long after start, or at SIGUSR1 "
                     "if that comes first (0: failed from the start)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
    cmd_->add_option("--drop-after", emu_.drop_after,
                     "Fault: after N changes, make the next one and drop its session unanswered");
    cmd_->add_flag("--hang", emu_.hang, "Fault: accept sessions and commands, never answer");
    cmd_->add_option("--max-sessions", emu_.max_sessions, "Concurrent sessions")
      ->capture_default_str();
    cmd_->add_option("--login-timeout-ms", login_ms_,
                     "Close a session that has not logged in (ACT-USER) by then")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}))
      ->capture_default_str();
    cmd_->add_option("--idle-timeout-ms", idle_ms_,
                     "Close a logged-in session that sends nothing for this long")
      ->check(CLI::Range(int64_t{1}, int64_t{86'400'000}))
      ->capture_default_str();
    add_log_level(*cmd_, level_, "Log level");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    auto size = parse_switch_size(size_);
    if (!size) {
      std::fprintf(stderr, "--size: '%s' is not NxM with N, M >= 1 and N + M <= 4096\n",
                   size_.c_str());
      return exit_config_error;
    }
    emu_.switch_options.size = *size;
    for (auto& p : patches_) {
      unsigned in = 0, out = 0;
      char tail = 0;
      if (std::sscanf(p.c_str(), "%u-%u%c", &in, &out, &tail) != 2) {
        std::fprintf(stderr, "--patch: '%s' is not IN-OUT\n", p.c_str());
        return exit_config_error;
      }
      emu_.switch_options.patches.push_back({in, out});
    }
    if (fail_after_ms_ > 0) {
      emu_.fail_later = failed_;
      emu_.fail_after = std::chrono::milliseconds{fail_after_ms_};
    } else {
      emu_.switch_options.failed_ports.insert(failed_.begin(), failed_.end());
    }
    emu_.delay = std::chrono::milliseconds{delay_ms_};
    emu_.login_timeout = std::chrono::milliseconds{login_ms_};
    emu_.idle_timeout = std::chrono::milliseconds{idle_ms_};
    emu_.framing = framing_ == "gr831" ? tl1_framing::gr831 : tl1_framing::loom;
    emu_.switch_options.gr833_alarms = emu_.framing == tl1_framing::gr831;
    emu_.autonomous_every = std::chrono::milliseconds{autonomous_ms_};
    emu_.logout_every = std::chrono::milliseconds{logout_ms_};
    setup_logging(level_named(level_));
    return run_ocs_emulator(emu_);
  }

private:
  CLI::App* cmd_ = nullptr;
  ocs_emulator_options emu_;
  std::string size_ = "32x32";
  std::string level_ = "info";
  std::vector<uint32_t> failed_;
  std::vector<std::string> patches_;
  int64_t delay_ms_ = 0;
  int64_t fail_after_ms_ = 0;
  int64_t login_ms_ = ocs_emulator_options{}.login_timeout.count();
  std::string framing_ = "loom";
  int64_t autonomous_ms_ = 0;
  int64_t logout_ms_ = 0;
  int64_t idle_ms_ = ocs_emulator_options{}.idle_timeout.count();
};

/// submit, jobs, groups, job, cancel, node, fabric, generation: one request each to a running
/// serve.
class admin_commands : public subcommand {
public:
  void add_to(CLI::App& app) override {
    add(app, "submit", "Submit an RL job (a job TOML file) to a running serve.", "file");
    add(app, "jobs", "List jobs and their states.", nullptr);
    add(app, "groups", "List co-execution groups.", nullptr);
    add(app, "job", "Show one job.", "id");
    add(app, "cancel", "Cancel a job: it leaves its group, the others go on.", "id");
    auto* node = add(app, "node",
                     "Take a node out of service (the jobs pinned to it fail; Loom does not\n"
                     "place them again, their frameworks submit them again: WEAVE 5.3's new\n"
                     "arrivals; placements and the fabric avoid the node), or put it back with\n"
                     "--up.",
                     "id");
    node->add_flag("--up", request_.node_back, "The node is back in service");
    node->add_option("--reason", request_.reason, "Why it is out (e.g. \"GPU 3 XID 79\")");
    auto* fabric = add(app, "fabric", "List committed circuit plans and Opus jobs on their rails.",
                       nullptr);
    auto* end = fabric->add_subcommand(
      "end-opus", "End an Opus job: its circuits leave its rails and its ports are free for\n"
                  "the next job (Opus 7).");
    end->add_option("job", request_.argument, "The Opus job")->required();
    end->fallthrough(); // -c, --json and the rest belong to `fabric`
    auto* gen = add(app, "generation",
                    "Show each generation deployment: what serves, its engines, the step,\nthe "
                    "forecast and the last decisions.",
                    nullptr);
    auto* abort = gen->add_subcommand("abort", "Abort a deployment's running step: its engines "
                                               "let its requests go,\nits routers hear why.");
    abort->add_option("deployment", request_.argument, "The deployment")->required();
    abort->add_option("--reason", request_.reason, "Why (logged and told to its routers)");
    abort->fallthrough(); // -c, --json and the rest belong to `generation`
    auto* layout = gen->add_subcommand(
      "reconfigure", "Switch a deployment to a parallel config now, as many instances as its\n"
                     "engines hold (drain, reshard, admit; mid-step once moves settle). With\n"
                     "its planner on, the planner may switch again at its next period.");
    layout->add_option("deployment", request_.argument, "The deployment")->required();
    layout->add_option("layout", request_.layout, "The config: TP2, EP8/TP2, AFD4:4")
      ->required();
    layout->fallthrough();
  }

  std::optional<int> run_if_given() override {
    for (auto* cmd : cmds_) {
      if (!*cmd)
        continue;
      auto cfg = load_config(config_);
      if (!cfg)
        return exit_config_error;
      // The same overrides `serve` took: its gateway, and its storage (where its keys are). A
      // list of gateways is the replicas of a service with [ha].
      auto overrides = overrides_;
      if (overrides.gateway.find(',') != std::string::npos) {
        request_.endpoints = overrides.gateway;
        overrides.gateway.clear();
      }
      auto errors = apply_overrides(*cfg, overrides);
      for (auto& e : errors)
        std::fprintf(stderr, "%s: %s\n", cmd->get_name().c_str(), e.c_str());
      if (!errors.empty())
        return exit_config_error;
      setup_logging(log_level::warn);
      if (request_.endpoints.empty() && overrides.gateway.empty())
        request_.endpoints = service_endpoints(*cfg);
      request_.command = cmd->get_name();
      return run_admin(*cfg, request_);
    }
    return std::nullopt;
  }

private:
  CLI::App* add(CLI::App& app, const char* name, const char* help, const char* arg) {
    auto* cmd = app.add_subcommand(name, help);
    if (arg)
      cmd->add_option(arg, request_.argument, arg)->required();
    cmd->add_option("-c,--config", config_,
                    "The service's config (endpoint, keys); default: embedded conf/loom.toml")
      ->check(CLI::ExistingFile);
    cmd->add_flag("--json", request_.json, "JSON for scripts");
    cmd->add_option("--key", request_.key,
                    "Admin key pair prefix (PREFIX.pub, PREFIX.secret); default: the "
                    "service's local admin key");
    cmd->add_option("--timeout-ms", request_.timeout_ms, "How long to wait")->capture_default_str();
    cmd->add_option("--gateway", overrides_.gateway,
                    "The gateway, as given to `serve --gateway` (overrides endpoints.gateway);\n"
                    "several, comma-separated, for replicas (default with [ha]: those etcd lists)");
    cmd->add_option("--storage", overrides_.storage,
                    "The storage path, as given to `serve --storage` (where its keys are)");
    cmds_.push_back(cmd);
    return cmd;
  }

  std::vector<CLI::App*> cmds_;
  admin_request request_;
  service_overrides overrides_;
  std::string config_;
};

} // namespace

std::unique_ptr<subcommand> replay_subcommand() {
  return std::make_unique<replay_command>();
}

std::unique_ptr<subcommand> ocs_emu_subcommand() {
  return std::make_unique<ocs_emu_command>();
}

std::unique_ptr<subcommand> admin_subcommands() {
  return std::make_unique<admin_commands>();
}

} // namespace loom
