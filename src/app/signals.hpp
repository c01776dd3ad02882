#pragma once

#include <chrono>

namespace loom {

/// Blocks SIGINT, SIGTERM, SIGHUP and SIGUSR1 (a leader resigns, [ha]) in the calling thread.
/// Call before any thread starts, so that every thread inherits the mask and only
/// await_service_signal() ever sees them.
void block_service_signals();

/// Waits for SIGINT or SIGTERM (stop), SIGHUP (reload the config) or SIGUSR1 and returns its
/// number.
int await_service_signal();

/// The same, waiting at most `timeout`: 0 when none came.
int await_service_signal(std::chrono::milliseconds timeout);

} // namespace loom
