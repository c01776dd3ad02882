#pragma once

namespace caf {
class actor_system_config;
}

namespace loom {

/// The scheduler a live service runs its actors on (serve, and the benchmarks that measure
/// serve's actors in-process): one thread per core, work sharing.
void use_live_scheduler(caf::actor_system_config& cfg);

} // namespace loom
