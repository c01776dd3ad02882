#pragma once

namespace loom {

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread. Call before any thread starts, so
/// that every thread inherits the mask and only await_service_signal() ever sees them.
void block_service_signals();

/// Waits for SIGINT or SIGTERM (stop) or SIGHUP (reload the config) and returns its number.
int await_service_signal();

} // namespace loom
