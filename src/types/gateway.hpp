#pragma once
// The gateway's plain data (no CAF): one ZeroMQ message as the I/O thread hands it over.

#include <string>

#include "types/common.hpp"

namespace loom {

/// A message from a peer's DEALER, as the ROUTER received it.
struct wire_frame {
  std::string identity; // ZeroMQ routing id of the connection
  std::string payload;  // the loom.v1.Envelope bytes (empty unless single_part)
  worker_role role = worker_role::rollout; // the role its CURVE key is configured for
  bool authenticated = false;            // false: insecure mode, no key, no role
  std::string key;                       // its CURVE public key (Z85) when authenticated
  bool single_part = true; // loom.v1 is one frame per message; anything else is malformed
};

} // namespace loom
