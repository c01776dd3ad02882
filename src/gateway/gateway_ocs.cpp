// The gateway's OCS agents (Opus §4.3 live): an agent registers for one device whose config
// says driver = "zmq", and that device's driver sends it requests through the gateway; the
// agent's results go back to the driver. One agent per device: another worker id for a device
// with a live agent is refused until that agent goes silent.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "drivers/ocs_wire.hpp"
#include "gateway/gateway_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"

namespace loom::gateway_steps {

std::optional<admission> agent_admission(self_ptr self, const std::string& identity,
                                         uint64_t rid, const std::string& worker_id,
                                         const session& s) {
  auto& st = self->state;
  auto it = st.agents.find(s.device);
  if (it == st.agents.end()) {
    send_error(self, identity, rid, v1::ERROR_NOT_FOUND,
               fmt::format("device '{}' is not driven through an OCS agent here (configure it "
                           "with driver = \"zmq\")",
                           s.device));
    return std::nullopt;
  }
  if (auto* holder = st.sessions.agent_of(s.device); holder && *holder != worker_id) {
    send_error(self, identity, rid, v1::ERROR_CONFLICT,
               fmt::format("device '{}' has a live agent, '{}'", s.device, *holder));
    return std::nullopt;
  }
  return admission{[self, identity, driver = it->second](auto done) {
    self->send(driver, join_atom::value, identity,
               caf::actor_cast<ocs_link_actor>(self));
    done(caf::error{});
  }};
}

bool handle_ocs(self_ptr self, const std::string& identity, const session& s,
                const v1::Envelope& env) {
  if (!env.has_ocs_result())
    return false;
  const auto& r = env.ocs_result();
  if (s.role != worker_role::ocs_agent || r.device() != s.device) {
    send_error(self, identity, env.request_id(), v1::ERROR_FORBIDDEN,
               s.role != worker_role::ocs_agent
                 ? fmt::format("a {} session may not send OcsResult", s.role)
                 : fmt::format("this agent drives '{}', not '{}'", s.device, r.device()));
    return true;
  }
  if (auto it = self->state.agents.find(s.device); it != self->state.agents.end())
    self->send(it->second, ocs_wire::reply_of(r));
  return true;
}

void request_agent(self_ptr self, const std::string& identity, const ocs_request& r) {
  auto e = ocs_wire::request(r);
  send_frame(self, identity, e);
}

void peer_gone(self_ptr self, const std::string& worker_id, const session& s,
               const std::string& why) {
  // Its waiting acquires would never be answered: they go with it (bounded state per peer).
  if (auto n = self->state.grants.drop_connection(s.identity))
    spdlog::info("event=acquires_dropped worker={} count={}", worker_id, n);
  engine_gone(self, worker_id, s, why);
  if (s.role != worker_role::ocs_agent)
    return;
  if (auto it = self->state.agents.find(s.device); it != self->state.agents.end()) {
    spdlog::warn("event=ocs_agent_gone worker={} device={} reason=\"{}\"", worker_id, s.device,
                 why);
    self->send(it->second, leave_atom::value, s.identity);
  }
}

} // namespace loom::gateway_steps
