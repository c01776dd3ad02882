#pragma once
// The gateway's steps, shared by its sources (gateway.cpp: frames, sessions and the executors'
// side; gateway_admin.cpp: operators' requests; gateway_worker.cpp: registered peers'
// traffic). Internal.

#include <cstdint>
#include <string>

#include "gateway/gateway.hpp"
#include "gateway/wire.hpp"

namespace loom::gateway_steps {

using self_ptr = gateway_actor::stateful_pointer<gateway_state>;

void send_frame(self_ptr self, const std::string& identity, v1::Envelope& e);

void send_error(self_ptr self, const std::string& identity, uint64_t request_id,
                v1::ErrorCode code, std::string message);

/// Answers a request with the reply `fill` builds.
template <class Fill>
void reply(self_ptr self, const std::string& identity, uint64_t request_id, Fill fill) {
  v1::Envelope e;
  e.set_request_id(request_id);
  fill(e);
  send_frame(self, identity, e);
}

/// Admin requests (the loom CLI); false if the envelope is not one.
bool handle_admin(self_ptr self, const std::string& identity, const v1::Envelope& env);

/// Traffic of a registered session.
void handle_worker(self_ptr self, const std::string& identity, session& s,
                   const v1::Envelope& env);

/// The live sessions per role, as gauges.
void update_alive(self_ptr self);

} // namespace loom::gateway_steps
