#pragma once

namespace caf {
class actor_system_config;
}

namespace loom {

/// Registers Loom's message types and error category with a CAF config. Live and replay
/// systems both call this, so the same actors run on either.
void register_loom_types(caf::actor_system_config& cfg);

} // namespace loom
