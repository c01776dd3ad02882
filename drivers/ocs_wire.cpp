#include "drivers/ocs_wire.hpp"

#include <array>
#include <utility>

#include "protocol/error.hpp"

namespace loom::ocs_wire {

namespace {

constexpr std::array<std::pair<errc, v1::OcsFailure>, 6> failures{{
  {errc::driver_refused, v1::OCS_FAILURE_REFUSED},
  {errc::driver_denied, v1::OCS_FAILURE_DENIED},
  {errc::driver_timeout, v1::OCS_FAILURE_TIMEOUT},
  {errc::driver_unreachable, v1::OCS_FAILURE_UNREACHABLE},
  {errc::driver_auth, v1::OCS_FAILURE_AUTH},
  {errc::driver_protocol, v1::OCS_FAILURE_PROTOCOL},
}};

v1::OcsFailure failure_of(uint8_t code) {
  for (auto [c, f] : failures)
    if (uint8_t(c) == code)
      return f;
  return v1::OCS_FAILURE_PROTOCOL;
}

uint8_t code_of(v1::OcsFailure f) {
  for (auto [c, w] : failures)
    if (w == f)
      return uint8_t(c);
  return uint8_t(errc::driver_protocol);
}

template <class Repeated>
void put(Repeated& out, const std::vector<cross_connect>& xcs) {
  for (auto& x : xcs) {
    auto* w = out.Add();
    w->set_input(x.in);
    w->set_output(x.out);
  }
}

template <class Repeated>
std::vector<cross_connect> take(const Repeated& in) {
  std::vector<cross_connect> out;
  out.reserve(size_t(in.size()));
  for (auto& w : in)
    out.push_back({w.input(), w.output()});
  return out;
}

} // namespace

v1::Envelope request(const ocs_request& r) {
  v1::Envelope e;
  if (r.kind == ocs_request_kind::apply) {
    auto* a = e.mutable_ocs_apply();
    a->set_device(r.device);
    a->set_command(r.id);
    put(*a->mutable_removes(), r.diff.removes);
    put(*a->mutable_adds(), r.diff.adds);
  } else {
    auto* q = e.mutable_ocs_read();
    q->set_device(r.device);
    q->set_command(r.id);
  }
  return e;
}

std::optional<ocs_request> request_of(const v1::Envelope& e) {
  if (e.has_ocs_apply()) {
    auto& a = e.ocs_apply();
    return ocs_request{a.device(), a.command(), ocs_request_kind::apply,
                       {take(a.removes()), take(a.adds())}};
  }
  if (e.has_ocs_read())
    return ocs_request{e.ocs_read().device(), e.ocs_read().command(), ocs_request_kind::read, {}};
  return std::nullopt;
}

v1::Envelope result(const ocs_reply& r) {
  v1::Envelope e;
  auto* w = e.mutable_ocs_result();
  w->set_device(r.device);
  w->set_command(r.id);
  w->set_ok(r.failure == 0);
  if (r.failure != 0) {
    w->set_failure(failure_of(r.failure));
    w->set_error(r.error);
  }
  w->set_latency_ns(r.report.latency_ns);
  w->set_ready_ns(r.report.ready_ns);
  w->set_attempts(r.report.attempts);
  w->set_inputs(r.health.inputs);
  w->set_outputs(r.health.outputs);
  put(*w->mutable_cross_connects(), r.cross_connects);
  for (auto p : r.health.failed_ports)
    w->add_failed_ports(p);
  w->set_connected(r.health.connected);
  w->set_applies(r.health.applies);
  w->set_failures(r.health.failures);
  return e;
}

ocs_reply reply_of(const v1::OcsResult& w) {
  ocs_reply r;
  r.device = w.device();
  r.id = w.command();
  if (!w.ok()) {
    r.failure = code_of(w.failure());
    r.error = w.error();
  }
  r.report = {w.latency_ns(), w.ready_ns(), w.attempts()};
  r.health.device = w.device();
  r.health.connected = w.connected();
  r.health.applies = w.applies();
  r.health.failures = w.failures();
  r.health.inputs = w.inputs();
  r.health.outputs = w.outputs();
  r.health.failed_ports.assign(w.failed_ports().begin(), w.failed_ports().end());
  r.cross_connects = take(w.cross_connects());
  r.health.cross_connects = uint32_t(r.cross_connects.size());
  if (!r.error.empty())
    r.health.last_error = r.error;
  return r;
}

} // namespace loom::ocs_wire
