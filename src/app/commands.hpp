#pragma once
// `loom`'s subcommands. Each adds its options to the command line and, once it is the one
// given, runs and returns the process exit code; main only parses and dispatches.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "drivers/xc_table.hpp"

namespace CLI {
class App;
}

namespace loom {

/// Exit codes: 1 a failure (storage, endpoint, no answer from the service), 2 a config, input or
/// command line that does not validate (the errors name file, line, key), 3 the service
/// answered and refused (a rejected job, or an error reply naming why).
constexpr int exit_failure = 1;
constexpr int exit_config_error = 2;
constexpr int exit_refused = 3;

class subcommand {
public:
  virtual ~subcommand() = default;
  /// Adds the subcommand (the admin family adds several) to `app`.
  virtual void add_to(CLI::App& app) = 0;
  /// The exit code if one of its subcommands was given; nothing otherwise.
  virtual std::optional<int> run_if_given() = 0;
};

/// serve, check-config, keygen, replay, report, events, drive, ocs-emu, ocs-agent, ha, and the
/// admin requests.
std::vector<std::unique_ptr<subcommand>> loom_subcommands();

// -- what the subcommands share -------------------------------------------------------------

/// The config named on the command line, or the embedded defaults when none is; nothing
/// after printing its errors (the caller exits with exit_config_error).
std::optional<config> load_config(const std::string& path);

/// Every error as FILE:LINE:COL: KEY: MESSAGE on stderr, then how many there were in `what`.
void print_errors(const std::vector<config_error>& errors, const char* what);

/// Adds --log-level, checked against the level names, to a subcommand.
void add_log_level(CLI::App& cmd, std::string& level, const char* help);

/// The level a --log-level value names (CLI11 has checked it is one).
log_level level_named(const std::string& name);

/// A switch size "NxM" with N, M >= 1 and N + M <= 4096 (ocs-emu, ocs-agent).
std::optional<switch_size> parse_switch_size(std::string_view text);

std::unique_ptr<subcommand> serve_subcommand();
std::unique_ptr<subcommand> check_config_subcommand();
std::unique_ptr<subcommand> keygen_subcommand();
std::unique_ptr<subcommand> replay_subcommand();
std::unique_ptr<subcommand> drive_subcommand();
std::unique_ptr<subcommand> ocs_emu_subcommand();
std::unique_ptr<subcommand> ocs_agent_subcommand();
std::unique_ptr<subcommand> admin_subcommands();
std::unique_ptr<subcommand> report_subcommand();
std::unique_ptr<subcommand> events_subcommand();
std::unique_ptr<subcommand> ha_subcommand();

} // namespace loom
