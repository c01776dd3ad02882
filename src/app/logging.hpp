#pragma once

#include "config/config.hpp"

namespace loom {

/// Logs go to stderr, one line per event, as key=value pairs after time and level.
void setup_logging(log_level level);

/// Logs events of `level` and above from now on (a reload).
void set_log_level(log_level level);

} // namespace loom
