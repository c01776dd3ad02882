#pragma once

#include "core/config.hpp"

namespace loom {

/// `loom serve`: opens storage, starts the metrics endpoint and the actors, runs until SIGINT or
/// SIGTERM, then stops every actor, flushes storage and returns the process exit code.
int serve(const config& cfg);

} // namespace loom
