#pragma once
// The serve side of an OCS agent (Opus §4.3; `loom ocs-agent` next to the switch): one more
// ocs_driver_actor, whose requests travel to the agent's session through the gateway and whose
// answers come back as the agent's OcsResult. With no agent attached the device is unreachable
// (its health says so and every apply fails at once), so the fabric keeps plans touching it
// back until an agent attaches again.

#include <chrono>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "protocol/actors.hpp"
#include "types/fabric_config.hpp"

namespace loom {

struct agent_driver_state {
  static inline const char* name = "agent_driver";
  using promise = std::variant<caf::typed_response_promise<apply_report>,
                               caf::typed_response_promise<std::vector<cross_connect>>,
                               caf::typed_response_promise<driver_health>>;
  std::string device;
  caf::timespan timeout{};
  std::string session; // the agent's connection; empty: none attached
  ocs_link_actor link;
  std::map<uint64_t, promise> in_flight; // by request id
  uint64_t next_id = 1;
  uint64_t applies = 0;
  uint64_t failures = 0;
  std::string last_error;
};

/// `timeout`: how long an agent may take to answer one request (its own retries included).
agent_driver_actor::behavior_type
agent_ocs_driver(agent_driver_actor::stateful_pointer<agent_driver_state> self, std::string device,
                 caf::timespan timeout);

/// The driver of a configured device with driver = "zmq"; it waits for the agent's answers
/// as long as the device's attempts at its timeout may take.
agent_driver_actor spawn_agent_driver(caf::actor_system& sys, const ocs_device& device);

} // namespace loom
