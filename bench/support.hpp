#pragma once
// What the benchmarks that start real `loom` processes share.

#include <chrono>
#include <cstdlib>
#include <string>

namespace loom::bench {

using clock_type = std::chrono::steady_clock;

/// The `loom` binary: LOOM_BIN when meson runs the benchmark, else the build's own.
inline std::string loom_binary() {
  auto* b = std::getenv("LOOM_BIN");
  return b ? b : LOOM_BUILD_ROOT "/loom";
}

} // namespace loom::bench
