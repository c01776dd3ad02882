#pragma once
// Which replay a scenario file asks for: its [scenario] kind.

#include <string>

namespace loom::replay {

/// The `kind` of the file's [scenario] table; empty if the file cannot be read or parsed or
/// has none (the scenario loader then reports why).
std::string scenario_kind(const std::string& path);

} // namespace loom::replay
