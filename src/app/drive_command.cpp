// `loom drive`: a scenario played live against a running serve, WEAVE's simulated frameworks
// as real workers (replay/drive.hpp) or a generation scenario's router and engine processes
// (replay/gen_drive.hpp); `--serve-config FILE` writes the config that serve must run.

#include <CLI/CLI.hpp>

#include <cstdio>

#include "app/commands.hpp"
#include "app/logging.hpp"
#include "protocol/error.hpp"
#include "replay/drive.hpp"
#include "replay/gen_drive.hpp"
#include "replay/scenario_file.hpp"

namespace loom {

namespace {

class drive_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "drive", "Play a scenario live against a running serve, simulated time compressed\n"
               "--time-scale times; writes DIR/report.json in replay's schema.\n"
               "WEAVE: its simulated frameworks as real workers (arrivals, staging, phases,\n"
               "tail reports, crashes), with the driver key --key.\n"
               "Generation: one loom-example-engine process per node (the engine simulator\n"
               "replay uses, key --engine-key) and the framework's router (key --key).\n"
               "The service must run the scenario's cluster or deployment: --serve-config FILE\n"
               "writes that config (with --storage, --endpoint and the keys).");
    cmd_->add_option("scenario", path_, "WEAVE or generation scenario file (TOML)")
      ->required()
      ->check(CLI::ExistingFile);
    cmd_->add_option("--endpoint", options_.endpoint, "The service's gateway")
      ->capture_default_str();
    cmd_->add_option("--server-key", options_.server_key,
                     "The service's public key file (omit if it runs insecure)");
    cmd_->add_option("--key", options_.key,
                     "A driver-role (WEAVE) or gen-router key pair prefix (KEY.pub, KEY.secret)");
    cmd_->add_option("--engine-key", options_.engine_key,
                     "Generation: the engines' gen-instance key pair prefix");
    cmd_->add_option("--engine-binary", options_.engine_binary,
                     "Generation: loom-example-engine; default: next to this binary");
    cmd_->add_option("--initial", options_.initial,
                     "Generation: the parallel config to start from (e.g. TP4); default: the "
                     "best static one of replay's sweep");
    cmd_->add_option("--admin-key", options_.admin_key,
                     "The admin key pair prefix; default: admin next to the server key");
    cmd_->add_option("--time-scale", options_.time_scale,
                     "Simulated seconds per real second; default 250 (WEAVE: the drive reports\n"
                     "its lag behind simulated time and warns past its budget), 20 (generation)")
      ->check(CLI::PositiveNumber);
    cmd_->add_option("--limit-s", options_.limit_s, "Give up after this long (real seconds)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
    cmd_->add_option("--out", options_.out_dir, "Output directory")->capture_default_str();
    cmd_->add_option("--serve-config", serve_config_,
                     "Write the service config for the scenario to this file and exit");
    cmd_->add_option("--storage", storage_, "With --serve-config: the service's storage path")
      ->capture_default_str();
    add_log_level(*cmd_, level_, "Log level");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    setup_logging(level_named(level_));
    const bool generation = replay::scenario_kind(path_) == "generation";
    if (options_.time_scale == 0)
      options_.time_scale = generation ? 20 : 250;
    if (generation)
      return run_generation();
    auto sc = replay::load_weave_scenario(path_);
    if (!sc.value) {
      print_errors(sc.errors, "scenario");
      return exit_config_error;
    }
    if (!serve_config_.empty())
      return write_serve_config(*sc.value);
    auto out = replay::run_drive(*sc.value, options_);
    if (!out) {
      std::fprintf(stderr, "drive failed: %s\n", render(out.error()).c_str());
      return 1;
    }
    std::printf("%sreport: %s/report.json\n", out->summary.c_str(), options_.out_dir.c_str());
    return 0;
  }

private:
  int run_generation() {
    auto sc = replay::load_gen_scenario(path_);
    if (!sc.value) {
      print_errors(sc.errors, "scenario");
      return exit_config_error;
    }
    if (!serve_config_.empty()) {
      auto initial = replay::drive_initial(*sc.value, options_);
      if (!initial) {
        std::fprintf(stderr, "drive: %s\n", render(initial.error()).c_str());
        return 1;
      }
      return write_file(replay::gen_serve_config_text(
        *sc.value, *initial, storage_, options_.endpoint,
        options_.key.empty() ? "" : options_.key + ".pub",
        options_.engine_key.empty() ? "" : options_.engine_key + ".pub", options_.time_scale));
    }
    auto out = replay::run_gen_drive(*sc.value, options_);
    if (!out) {
      std::fprintf(stderr, "drive failed: %s\n", render(out.error()).c_str());
      return 1;
    }
    std::printf("%sreport: %s/report.json\n", out->summary.c_str(), options_.out_dir.c_str());
    return 0;
  }

  int write_serve_config(const replay::weave_scenario& sc) {
    auto text = replay::serve_config_text(sc, storage_, options_.endpoint,
                                          options_.key.empty() ? "" : options_.key + ".pub");
    if (!text) {
      std::fprintf(stderr, "drive: %s\n", render(text.error()).c_str());
      return 1;
    }
    return write_file(*text);
  }

  int write_file(const std::string& text) {
    std::FILE* f = std::fopen(serve_config_.c_str(), "w");
    if (!f || std::fputs(text.c_str(), f) < 0) {
      std::fprintf(stderr, "drive: cannot write %s\n", serve_config_.c_str());
      return 1;
    }
    std::fclose(f);
    std::printf("wrote %s: serve it with `loom serve -c %s`\n", serve_config_.c_str(),
                serve_config_.c_str());
    return 0;
  }

  CLI::App* cmd_ = nullptr;
  std::string path_;
  replay::drive_options options_{"tcp://127.0.0.1:5555", "", "", "", 0, 600, "drive-out",
                                 "",                     "", ""};
  std::string serve_config_;
  std::string storage_ = "var/loom-drive";
  std::string level_ = "warn";
};

} // namespace

std::unique_ptr<subcommand> drive_subcommand() {
  return std::make_unique<drive_command>();
}

} // namespace loom
