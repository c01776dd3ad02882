#pragma once
// OCS agents on loom.v1 (Opus §4.3): the service's requests and the agent's results as
// Envelopes, for both ends (the gateway and `loom ocs-agent`).

#include <optional>

#include "loom.pb.h"
#include "protocol/inspect.hpp"

namespace loom::ocs_wire {

/// OcsApply or OcsRead.
v1::Envelope request(const ocs_request& r);

/// The request an OcsApply or OcsRead carries, or nothing for any other body.
std::optional<ocs_request> request_of(const v1::Envelope& e);

v1::Envelope result(const ocs_reply& r);
ocs_reply reply_of(const v1::OcsResult& r);

} // namespace loom::ocs_wire
