#pragma once

#include <string>

namespace loom {

/// One problem in a config file, located for the operator.
struct config_error {
  std::string file;
  int line = 0;   // 1-based; 0 when the whole file is concerned
  int column = 0;
  std::string key; // full key path, e.g. "cluster.rollout[2].gpus"
  std::string message;

  /// "FILE:LINE:COL: KEY: MESSAGE", the form compilers use, so editors can jump to it.
  std::string to_string() const;
};

} // namespace loom
