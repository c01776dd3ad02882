#include "drivers/ocs_driver.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"

namespace loom {

namespace {

/// Records a failure in the health counters and passes the error on.
caf::error failed(driver_health& health, caf::error err) {
  ++health.failures;
  health.last_error = render(err);
  spdlog::warn("event=ocs_driver_failed device={} error=\"{}\"", health.device, health.last_error);
  return err;
}

} // namespace

namespace {

using emulated_ptr = emulated_ocs_actor::stateful_pointer<emulated_ocs_state>;

/// The next apply is refused or times out: an injected count first, then at random.
bool draw_fault(emulated_ocs_state& st, uint32_t& counter, double probability) {
  if (counter > 0) {
    --counter;
    return true;
  }
  std::uniform_real_distribution<double> coin{0.0, 1.0};
  return probability > 0 && coin(st.fault_rng) < probability;
}

/// A diff is checked, then the mirrors move at once and the device confirms once they have
/// settled (its latency on the actor clock); faults refuse it or let it time out.
caf::result<apply_report> emulate_apply(emulated_ptr self, const xc_diff& diff) {
  auto& st = self->state;
  if (auto v = st.table->check(diff))
    return failed(st.health, make_error(errc::driver_refused, v->message));
  std::set<uint32_t> failed_ports{st.faults.failed_ports.begin(), st.faults.failed_ports.end()};
  // A failed port takes no new cross-connect; one it carries can still be removed.
  for (auto& x : diff.adds)
    for (auto port : {x.in, x.out})
      if (failed_ports.count(port))
        return failed(st.health,
                      make_error(errc::driver_denied, fmt::format("SROF port {} failed", port)));
  if (draw_fault(st, st.faults.refuse_next, st.faults.refuse_probability))
    return failed(st.health, make_error(errc::driver_denied, "SROF device refused the command"));
  auto id = st.next_id++;
  auto& p = st.in_flight[id];
  p.promise = self->make_response_promise<apply_report>();
  if (draw_fault(st, st.faults.timeout_next, st.faults.timeout_probability)) {
    p.times_out = true;
    self->delayed_send(self, st.config.command_timeout, commit_atom::value, id);
    return p.promise;
  }
  auto latency = st.sampler->sample();
  st.table->apply(diff);
  p.report.latency_ns = latency.count();
  p.report.ready_ns = (latency + st.config.link_up_delay).count();
  self->delayed_send(self, latency, commit_atom::value, id);
  return p.promise;
}

} // namespace

emulated_ocs_actor::behavior_type
emulated_ocs(emulated_ocs_actor::stateful_pointer<emulated_ocs_state> self,
             emulated_ocs_config config) {
  auto& st = self->state;
  st.table.emplace(config.size, config.masked);
  st.sampler.emplace(config.latency, config.seed);
  st.fault_rng.seed(config.seed ^ 0x9e3779b97f4a7c15ULL);
  st.health.device = config.device;
  st.health.connected = true;
  st.config = std::move(config);
  return {
    [self](apply_atom, const xc_diff& diff) { return emulate_apply(self, diff); },
    [self](commit_atom, uint64_t id) {
      auto& st = self->state;
      auto it = st.in_flight.find(id);
      if (it == st.in_flight.end())
        return;
      auto p = std::move(it->second);
      st.in_flight.erase(it);
      if (p.times_out) {
        p.promise.deliver(failed(st.health, make_error(errc::driver_timeout,
                                                       "device did not answer in time")));
        return;
      }
      ++st.health.applies;
      p.promise.deliver(p.report);
    },
    [self](get_atom) { return self->state.table->list(); },
    [self](health_atom) {
      auto h = self->state.health;
      h.cross_connects = static_cast<uint32_t>(self->state.table->size());
      h.inputs = self->state.table->geometry().inputs;
      h.outputs = self->state.table->geometry().outputs;
      h.failed_ports = self->state.faults.failed_ports;
      return h;
    },
    [self](fault_atom, ocs_fault& faults) {
      for (auto port : faults.failed_ports)
        spdlog::info("event=ocs_fault_injected device={} port={}", self->state.health.device,
                     port);
      self->state.faults = std::move(faults);
      return ok_atom::value;
    },
  };
}

namespace {

/// Reads size and cross-connects from the device when the cached view is missing or stale.
caf::error refresh(tl1_ocs_state& st) {
  if (st.table)
    return caf::none;
  auto size = st.client->size();
  if (!size)
    return size.error();
  auto xcs = st.client->list();
  if (!xcs)
    return xcs.error();
  st.table.emplace(*size, st.masked);
  st.table->assign(*xcs);
  return caf::none;
}

} // namespace

ocs_driver_actor::behavior_type tl1_ocs_driver(ocs_driver_actor::stateful_pointer<tl1_ocs_state> self,
                                               tl1_ocs_config config) {
  auto& st = self->state;
  st.client = std::make_unique<tl1_client>(config.endpoint, config.options);
  st.masked = std::move(config.masked);
  st.link_up_delay = config.link_up_delay;
  st.health.device = config.device;
  return {
    [self](apply_atom, const xc_diff& diff) -> caf::result<apply_report> {
      auto& st = self->state;
      if (auto err = refresh(st))
        return failed(st.health, std::move(err));
      if (auto v = st.table->check(diff))
        return failed(st.health, make_error(errc::driver_refused, v->message));
      auto start = self->clock().now();
      auto attempts = st.client->apply(diff);
      auto latency = self->clock().now() - start;
      if (!attempts) {
        st.table.reset(); // what the device did is unknown: read it back next time
        return failed(st.health, std::move(attempts.error()));
      }
      st.table->apply(diff);
      ++st.health.applies;
      apply_report report;
      report.latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(latency).count();
      report.ready_ns = report.latency_ns + self->state.link_up_delay.count();
      report.attempts = *attempts;
      return report;
    },
    [self](get_atom) -> caf::result<std::vector<cross_connect>> {
      auto& st = self->state;
      st.table.reset();
      if (auto err = refresh(st))
        return failed(st.health, std::move(err));
      return st.table->list();
    },
    [self](health_atom) {
      // A poll asks the switch (its alarms), so that a dead link or a failed port shows.
      auto& st = self->state;
      auto h = st.health;
      auto alarms = st.client->alarms();
      caf::error err = alarms ? refresh(st) : alarms.error();
      h.connected = !err;
      if (err)
        h.last_error = render(err);
      else
        h.failed_ports = std::move(*alarms);
      if (auto& table = st.table) {
        h.cross_connects = static_cast<uint32_t>(table->size());
        h.inputs = table->geometry().inputs;
        h.outputs = table->geometry().outputs;
      }
      return h;
    },
  };
}

namespace {

caf::timespan link_up_of(const ocs_device& device) {
  return std::chrono::duration_cast<caf::timespan>(
    std::chrono::duration<double, std::milli>{device.link_up_ms});
}

} // namespace

std::optional<ocs_driver_actor> spawn_ocs_driver(caf::actor_system& sys, const ocs_device& device,
                                                 uint64_t seed) {
  const auto ports = uint32_t(device.ports);
  std::set<uint32_t> masked;
  for (int p : device.masked_ports) {
    masked.insert(uint32_t(p));
    masked.insert(ports + uint32_t(p));
  }
  switch (device.driver) {
    case driver_kind::emulated: {
      emulated_ocs_config c;
      c.device = device.id;
      c.size = {ports, ports};
      c.masked = std::move(masked);
      c.latency = {device.reconfig_ms, device.reconfig_ms * 1.5};
      c.link_up_delay = link_up_of(device);
      c.seed = seed;
      return caf::actor_cast<ocs_driver_actor>(sys.spawn(emulated_ocs, c));
    }
    case driver_kind::tl1: {
      tl1_ocs_config c;
      c.device = device.id;
      auto colon = device.address.rfind(':');
      c.endpoint.host = device.address.substr(0, colon);
      c.endpoint.port = uint16_t(std::stoi(device.address.substr(colon + 1)));
      c.endpoint.user = device.user;
      c.endpoint.password = device.password;
      c.options.command_timeout = std::chrono::milliseconds{device.timeout_ms};
      c.options.max_attempts = device.attempts;
      c.masked = std::move(masked);
      c.link_up_delay = link_up_of(device);
      return sys.spawn<caf::detached>(tl1_ocs_driver, c);
    }
    case driver_kind::zmq:
      return std::nullopt;
  }
  return std::nullopt;
}

} // namespace loom
