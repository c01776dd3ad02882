#pragma once

namespace loom {

/// Blocks SIGINT and SIGTERM in the calling thread. Call before any thread starts, so that every
/// thread inherits the mask and only await_shutdown_signal() ever sees them.
void block_shutdown_signals();

/// Waits for SIGINT or SIGTERM and returns its number.
int await_shutdown_signal();

} // namespace loom
