#pragma once
// Reading every switch behind a real driver once when the service starts, so that a wrong
// address, login or size shows at start rather than at the first commit.

#include <map>
#include <string>
#include <vector>

#include "protocol/actors.hpp"
#include "types/fabric_config.hpp"

namespace caf {
class actor_system;
}

namespace loom {

/// Asks each device's driver for its cross-connects and geometry and logs one line per device:
/// what it found (a size other than the configured one is a warning) or why it could not. The
/// start does not wait: a switch that is down must not keep the service down.
void probe_devices(caf::actor_system& sys, const std::vector<ocs_device>& devices,
                   const std::map<std::string, ocs_driver_actor>& drivers);

} // namespace loom
