#include "replay/scenario_file.hpp"

#include <limits>
#include <set>

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

void read_seeds(table_reader& head, uint64_t& seed_out, std::vector<uint64_t>& seeds_out) {
  constexpr int64_t absent = std::numeric_limits<int64_t>::min();
  auto seeds = head.optional<std::vector<int64_t>>("seeds", {});
  auto seed = head.optional<int64_t>("seed", absent);
  if (seed && *seed != absent)
    if (auto v = at_least<int64_t>(head, "seed", seed, 0))
      seed_out = uint64_t(*v);
  if (!seeds || seeds->empty()) {
    seeds_out = {seed_out};
    return;
  }
  if (seed && *seed != absent)
    head.error("seeds", "give either seed or seeds, not both");
  std::set<int64_t> seen;
  for (auto s : *seeds)
    if (s < 0 || !seen.insert(s).second)
      head.error("seeds", fmt::format("must be distinct integers >= 0, got {}", s));
  for (auto s : *seeds)
    seeds_out.push_back(uint64_t(std::max<int64_t>(0, s)));
  seed_out = seeds_out.front();
}

} // namespace loom::replay
