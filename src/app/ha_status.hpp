#pragma once
// `loom ha` and where clients of a service with [ha] find it.

#include <string>

#include "config/config.hpp"

namespace loom {

/// The gateway endpoints to reach the service at, comma-separated: with [ha], the leader's and
/// every replica's as they advertise themselves in etcd (a client connects to each; only the
/// leader listens), else endpoints.gateway.
std::string service_endpoints(const config& cfg);

} // namespace loom
