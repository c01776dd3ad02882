#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace loom {

/// The entry of a built-in table (GPUs, models, OCS technologies) with the given name.
template <class T>
std::optional<T> find_by_name(const std::vector<T>& table, std::string_view name) {
  for (const auto& entry : table)
    if (entry.name == name)
      return entry;
  return std::nullopt;
}

} // namespace loom
