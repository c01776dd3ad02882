#pragma once
// What every replay scenario file shares: it is TOML with a [scenario] table whose `kind` says
// which replay it is for; loading reads and parses it, hands the root table to the kind's
// reader, and reports every problem at once with file, line and key.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/toml_reader.hpp"
#include "types/config_error.hpp"

namespace loom::replay {

template <class Scenario>
struct scenario_result {
  std::optional<Scenario> value; // only when there are no errors
  std::vector<config_error> errors;
};

/// The `kind` of the file's [scenario] table; empty if the file cannot be read or parsed or
/// has none (the scenario loader then reports why).
std::string scenario_kind(const std::string& path);

/// A file a scenario names under `key` (`value`), resolved against the scenario file's
/// directory `dir`; nothing, after an error naming the key and the resolved path, when it is
/// not a readable regular file.
std::optional<std::string> scenario_input(table_reader& table, const char* key,
                                          const std::string& dir, const std::string& value);

/// `seed = N` or `seeds = [N, ...]` of a [scenario] table: one replay per seed, the first one
/// also `seed_out`; `seed_out` keeps its default when neither is given.
void read_seeds(table_reader& head, uint64_t& seed_out, std::vector<uint64_t>& seeds_out);

/// Loads `path` with `read(root, scenario, directory of the file, errors)`; unknown top-level
/// tables are errors.
template <class Scenario, class Read>
scenario_result<Scenario> load_scenario_file(const std::string& path, Read read) {
  scenario_result<Scenario> result;
  auto text = read_text_file(path, result.errors);
  if (!text)
    return result;
  auto doc = parse_toml(*text, path, result.errors);
  if (!doc)
    return result;
  config_diagnostics diag{path};
  table_reader root{*doc, "", diag};
  Scenario sc;
  sc.source = path;
  read(root, sc, std::filesystem::path{path}.parent_path().string(), result.errors);
  root.reject_unknown();
  for (auto& e : diag.take_errors())
    result.errors.push_back(std::move(e));
  if (result.errors.empty())
    result.value = std::move(sc);
  return result;
}

} // namespace loom::replay
