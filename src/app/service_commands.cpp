// `loom serve`, `loom check-config` and `loom keygen`: running and preparing one service.

#include <CLI/CLI.hpp>

#include <cstdio>

#include "app/admin.hpp"
#include "app/commands.hpp"
#include "app/logging.hpp"
#include "app/serve.hpp"

namespace loom {

namespace {

class serve_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "serve", "Run the Loom service for one cluster in the foreground until SIGINT/SIGTERM:\n"
               "opens RocksDB storage, serves Prometheus /metrics, hosts the actors. SIGHUP\n"
               "reloads the config: client keys and log level at once, the rest at restart.");
    cmd_->add_option("-c,--config", config_, "Config file (TOML); default: the embedded "
                                              "conf/loom.toml")
      ->check(CLI::ExistingFile);
    add_log_level(*cmd_, level_, "Override the config's log level");
    cmd_->add_option("--storage", overrides_.storage, "Override storage.path (RocksDB directory)");
    cmd_->add_option("--gateway", overrides_.gateway,
                     "Override endpoints.gateway (e.g. tcp://0.0.0.0:5555)");
    cmd_->add_option("--metrics", overrides_.metrics,
                     "Override endpoints.metrics (HOST:PORT; port 0 picks one)");
    cmd_->add_flag("--salvage", salvage_,
                   "Open a database whose write-ahead log is damaged: keep every record before "
                   "the damage, drop the rest (back the storage directory up first)");
    cmd_->add_flag("--new-keys", options_.new_keys,
                   "Make a new server key pair when the keys directory has none but the "
                   "database has state (every client then needs the new server.pub)");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    auto cfg = load_config(config_);
    if (!cfg)
      return exit_config_error;
    auto errors = apply_overrides(*cfg, overrides_);
    for (auto& e : errors)
      std::fprintf(stderr, "serve: %s\n", e.c_str());
    if (!errors.empty())
      return exit_config_error;
    setup_logging(level_.empty() ? cfg->level : level_named(level_));
    options_.recovery = salvage_ ? wal_recovery::salvage : wal_recovery::strict;
    options_.reload = [this]() -> std::optional<config> {
      auto again = load_config(config_);
      if (!again || !apply_overrides(*again, overrides_).empty())
        return std::nullopt;
      if (!level_.empty())
        again->level = level_named(level_); // the command line still wins
      return again;
    };
    return serve(*cfg, options_);
  }

private:
  CLI::App* cmd_ = nullptr;
  std::string config_;
  std::string level_;
  service_overrides overrides_;
  bool salvage_ = false;
  serve_options options_;
};

class check_config_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "check-config", "Validate a config file without starting anything; prints every error "
                      "as\nFILE:LINE:COL: KEY: MESSAGE and exits 2 if there is any.");
    cmd_->add_option("file", path_, "Config file; default: the embedded conf/loom.toml");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    auto cfg = load_config(path_);
    if (!cfg)
      return exit_config_error;
    auto& c = *cfg;
    std::printf("%s: ok: cluster '%s', %zu rollout nodes (%d GPUs, $%.2f/h), %zu training nodes "
                "(%d GPUs, $%.2f/h), fabric %s with %zu ToRs, %zu OCS, %zu links, %zu generation "
                "deployments\n",
                c.source.c_str(), c.cluster.name.c_str(), c.cluster.rollout.size(),
                c.cluster.total_gpus(pool_kind::rollout),
                c.cluster.cost_per_hour(pool_kind::rollout), c.cluster.training.size(),
                c.cluster.total_gpus(pool_kind::training),
                c.cluster.cost_per_hour(pool_kind::training),
                std::string{to_string(c.fabric.kind)}.c_str(), c.fabric.tors.size(),
                c.fabric.ocs.size(), c.fabric.links.size(), c.generation.size());
    return 0;
  }

private:
  CLI::App* cmd_ = nullptr;
  std::string path_;
};

class keygen_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "keygen", "Write a CURVE key pair NAME.pub / NAME.secret (Z85) for the gateway's clients "
                "or\nthe service; list the .pub in the config's [security.clients] for its role.");
    cmd_->add_option("name", name_, "Key name")->required();
    cmd_->add_option("--out", dir_, "Directory")->capture_default_str();
    cmd_->add_flag("--force", force_, "Replace an existing key pair of that name");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    return run_keygen(name_, dir_, force_);
  }

private:
  CLI::App* cmd_ = nullptr;
  std::string name_;
  std::string dir_ = "keys";
  bool force_ = false;
};

} // namespace

std::unique_ptr<subcommand> serve_subcommand() {
  return std::make_unique<serve_command>();
}

std::unique_ptr<subcommand> check_config_subcommand() {
  return std::make_unique<check_config_command>();
}

std::unique_ptr<subcommand> keygen_subcommand() {
  return std::make_unique<keygen_command>();
}

} // namespace loom
