#include "config/config_parts.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <filesystem>

#include <fmt/format.h>

#include "config/expand.hpp"

namespace loom::config_parts {

std::vector<std::string> expand(table_reader& r, std::string_view key, const std::string& s) {
  auto result = expand_range(s);
  if (auto* msg = std::get_if<std::string>(&result)) {
    r.error(key, *msg);
    return {};
  }
  return std::get<std::vector<std::string>>(std::move(result));
}

bool parse_port(std::string_view s, int& port) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

bool valid_host_port(std::string_view s) {
  auto colon = s.rfind(':');
  int port = 0;
  return colon != std::string_view::npos && colon > 0
         && parse_port(s.substr(colon + 1), port) && port >= 0 && port <= 65535;
}

std::string resolve_path(const std::string& config_dir, const std::string& path) {
  return path.empty() || path.front() == '/' || config_dir.empty()
           ? path
           : (std::filesystem::path{config_dir} / path).string();
}

bool id_registry::add(table_reader& r, std::string_view key, const std::string& id) {
  auto [it, fresh] = first_line_.emplace(id, r.line_of(key));
  if (!fresh)
    r.error(key, fmt::format("duplicate {} id '{}' (first defined at line {})", what_, id,
                             it->second));
  return fresh;
}

login_file read_login_file(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    return {{}, {}, fmt::format("cannot read '{}': {}", path, std::strerror(errno))};
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#')
      continue;
    auto colon = line.find(':');
    if (colon == 0 || colon == std::string::npos)
      break;
    return {line.substr(0, colon), line.substr(colon + 1), {}};
  }
  return {{}, {}, fmt::format("'{}' holds no USER:PASSWORD line", path)};
}

} // namespace loom::config_parts
