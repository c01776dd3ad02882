#include "app/commands.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>

namespace loom {

std::vector<std::unique_ptr<subcommand>> loom_subcommands() {
  std::vector<std::unique_ptr<subcommand>> out;
  out.push_back(serve_subcommand());
  out.push_back(keygen_subcommand());
  out.push_back(admin_subcommands());
  out.push_back(check_config_subcommand());
  out.push_back(ocs_emu_subcommand());
  out.push_back(ocs_agent_subcommand());
  out.push_back(replay_subcommand());
  out.push_back(report_subcommand());
  out.push_back(events_subcommand());
  out.push_back(drive_subcommand());
  out.push_back(ha_subcommand());
  return out;
}

std::optional<config> load_config(const std::string& path) {
  auto result = path.empty()
                  ? parse_config(embedded_config_text(), "<embedded conf/loom.toml>")
                  : load_config_file(path);
  if (!result.value)
    print_errors(result.errors, "config");
  return std::move(result.value);
}

void add_log_level(CLI::App& cmd, std::string& level, const char* help) {
  std::vector<std::string> names;
  for (auto l : all_values<log_level>())
    names.emplace_back(to_string(l));
  cmd.add_option("--log-level", level, help)->check(CLI::IsMember(names))->capture_default_str();
}

void print_errors(const std::vector<config_error>& errors, const char* what) {
  for (auto& e : errors)
    std::fprintf(stderr, "%s\n", e.to_string().c_str());
  std::fprintf(stderr, "%zu error%s in %s\n", errors.size(), errors.size() == 1 ? "" : "s", what);
}

log_level level_named(const std::string& name) {
  return parse_name<log_level>(name).value_or(log_level::info);
}

} // namespace loom
