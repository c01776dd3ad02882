#include "replay/scenario_file.hpp"

#include <fmt/format.h>

namespace loom::replay {

std::string scenario_kind(const std::string& path) {
  std::vector<config_error> errors;
  auto text = read_text_file(path, errors);
  if (!text)
    return {};
  auto doc = parse_toml(*text, path, errors);
  if (!doc)
    return {};
  return (*doc)["scenario"]["kind"].value_or(std::string{});
}

std::optional<std::string> scenario_input(table_reader& table, const char* key,
                                          const std::string& dir, const std::string& value) {
  std::error_code ec;
  auto resolved = std::filesystem::absolute(std::filesystem::path{dir} / value, ec)
                    .lexically_normal();
  if (!std::filesystem::is_regular_file(resolved, ec)) {
    table.error(key, fmt::format("'{}' resolves to {} (against the scenario file's directory), "
                                 "which is not a readable file", value, resolved.string()));
    return std::nullopt;
  }
  return resolved.string();
}

} // namespace loom::replay
