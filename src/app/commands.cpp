#include "app/commands.hpp"

#include <cstdio>

namespace loom {

std::vector<std::unique_ptr<subcommand>> loom_subcommands() {
  std::vector<std::unique_ptr<subcommand>> out;
  out.push_back(serve_subcommand());
  out.push_back(keygen_subcommand());
  out.push_back(admin_subcommands());
  out.push_back(check_config_subcommand());
  out.push_back(ocs_emu_subcommand());
  out.push_back(replay_subcommand());
  return out;
}

config_result load_config(const std::string& path) {
  if (path.empty())
    return parse_config(embedded_config_text(), "<embedded conf/loom.toml>");
  return load_config_file(path);
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
