#include "replay/scenario_file.hpp"

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

} // namespace loom::replay
