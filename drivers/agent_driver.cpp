#include "drivers/agent_driver.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"

namespace loom {

namespace {

using self_ptr = agent_driver_actor::stateful_pointer<agent_driver_state>;

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

void fail(agent_driver_state::promise& p, const caf::error& err) {
  std::visit([&](auto& promise) { promise.deliver(err); }, p);
}

/// Every request in flight fails (the agent went away or was replaced).
void fail_all(self_ptr self, const std::string& why) {
  auto& st = self->state;
  for (auto& [id, p] : st.in_flight)
    fail(p, make_error(errc::driver_unreachable, why));
  st.in_flight.clear();
}

caf::error unreachable(const agent_driver_state& st) {
  return make_error(errc::driver_unreachable,
                    fmt::format("no OCS agent of device '{}' is connected", st.device));
}

/// Sends the request to the attached agent; its answer (or deadline) settles `p`.
template <class T>
caf::result<T> ask(self_ptr self, ocs_request_kind kind, xc_diff diff = {}) {
  auto& st = self->state;
  if (st.session.empty())
    return unreachable(st);
  auto promise = self->make_response_promise<T>();
  const auto id = st.next_id++;
  st.in_flight.emplace(id, promise);
  self->send(st.link, ocs_atom::value, st.session, ocs_request{st.device, id, kind, std::move(diff)});
  self->delayed_send(self, st.timeout, tick_atom::value, id);
  return promise;
}

driver_health health_of(const agent_driver_state& st, const ocs_reply* r) {
  driver_health h = r ? r->health : driver_health{};
  h.device = st.device;
  h.connected = !st.session.empty() && (!r || r->health.connected);
  h.applies = st.applies;
  h.failures = st.failures;
  h.last_error = st.last_error;
  return h;
}

void answered(self_ptr self, const ocs_reply& r) {
  auto& st = self->state;
  auto it = st.in_flight.find(r.id);
  if (it == st.in_flight.end())
    return; // past its deadline, or from a replaced session
  auto p = std::move(it->second);
  st.in_flight.erase(it);
  if (r.failure != 0) {
    ++st.failures;
    st.last_error = r.error;
    auto err = make_error(errc(r.failure), r.error);
    std::visit(overloaded{[&](caf::typed_response_promise<driver_health>& h) {
                            // A health poll answers even when the switch does not: unhealthy.
                            auto out = health_of(st, &r);
                            out.connected = false;
                            h.deliver(out);
                          },
                          [&](auto& other) { other.deliver(err); }},
               p);
    return;
  }
  std::visit(overloaded{[&](caf::typed_response_promise<apply_report>& a) {
                          ++st.applies;
                          a.deliver(r.report);
                        },
                        [&](caf::typed_response_promise<std::vector<cross_connect>>& g) {
                          g.deliver(r.cross_connects);
                        },
                        [&](caf::typed_response_promise<driver_health>& h) {
                          h.deliver(health_of(st, &r));
                        }},
             p);
}

} // namespace

agent_driver_actor::behavior_type
agent_ocs_driver(agent_driver_actor::stateful_pointer<agent_driver_state> self, std::string device,
                 caf::timespan timeout) {
  self->state.device = std::move(device);
  self->state.timeout = timeout;
  return {
    [self](apply_atom, xc_diff& diff) { return ask<apply_report>(self, ocs_request_kind::apply, std::move(diff)); },
    [self](get_atom) { return ask<std::vector<cross_connect>>(self, ocs_request_kind::read); },
    [self](health_atom) -> caf::result<driver_health> {
      if (self->state.session.empty()) {
        auto h = health_of(self->state, nullptr);
        h.last_error = message_of(unreachable(self->state));
        return h;
      }
      return ask<driver_health>(self, ocs_request_kind::read);
    },
    [self](join_atom, const std::string& session, ocs_link_actor link) {
      auto& st = self->state;
      if (!st.session.empty() && st.session != session)
        fail_all(self, fmt::format("the agent of '{}' was replaced", st.device));
      st.session = session;
      st.link = std::move(link);
      spdlog::info("event=ocs_agent_attached device={}", st.device);
    },
    [self](leave_atom, const std::string& session) {
      auto& st = self->state;
      if (session != st.session)
        return;
      st.session.clear();
      st.link = nullptr;
      st.last_error = fmt::format("the OCS agent of '{}' went away", st.device);
      fail_all(self, st.last_error);
      spdlog::warn("event=ocs_agent_detached device={}", st.device);
    },
    [self](const ocs_reply& r) { answered(self, r); },
    [self](tick_atom, uint64_t id) {
      auto& st = self->state;
      auto it = st.in_flight.find(id);
      if (it == st.in_flight.end())
        return;
      ++st.failures;
      st.last_error = fmt::format("the OCS agent of '{}' did not answer in {} ms", st.device,
                                  std::chrono::duration_cast<std::chrono::milliseconds>(st.timeout).count());
      fail(it->second, make_error(errc::driver_timeout, st.last_error));
      st.in_flight.erase(it);
    },
  };
}

agent_driver_actor spawn_agent_driver(caf::actor_system& sys, const ocs_device& device) {
  // Each attempt may time out, with a backoff between; and a second of slack for the wire.
  const auto patience = std::chrono::milliseconds{2 * device.timeout_ms * device.attempts + 1000};
  return sys.spawn(agent_ocs_driver, device.id, caf::timespan{patience});
}

} // namespace loom
