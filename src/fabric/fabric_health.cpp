// The fabric controller's view of its devices (RFabric App. H; Opus §4.3): periodic health
// polls find switches that stop answering (or whose agent went away) and ports that raise an
// alarm. A down device keeps plans touching it back; once it answers again it is read back and
// repaired to what the committed plans say before plans use it. A failed port is masked and
// the owners of circuits on it re-plan around it at their next window.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "drivers/xc_table.hpp"
#include "fabric/controller_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "store/persist.hpp"

namespace loom::controller_steps {

namespace {

void record(self_ptr self, loom_event event) {
  write_batch batch;
  batch.sync = self->state.config.sync_writes;
  persist(self, self->state.store, std::move(batch), std::move(event), [] {},
          [](caf::error) {});
}

const std::string& device_id(self_ptr self, uint32_t dev) {
  return self->state.model->devices[dev].id;
}

void mark_down(self_ptr self, uint32_t dev, const std::string& why) {
  auto& ds = self->state.devices[dev];
  ds.resync = true;
  if (ds.down)
    return;
  ds.down = true;
  if (auto& m = self->state.config.metrics) {
    const auto& id = device_id(self, dev);
    m->ocs_device_up(id).Set(0);
    m->ocs_device_errors(id).Increment();
    m->ocs_device_last_error(id).Set(double(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count()));
  }
  ds.reason = why;
  record(self, {event_kind::ocs_device_down, device_id(self, dev),
                fmt::format("reason=\"{}\"", why)});
}

/// The cross-connects the committed plans put on the device, without those on masked ports
/// (their owners re-plan around them).
std::vector<cross_connect> expected_on(self_ptr self, uint32_t dev) {
  auto& st = self->state;
  std::vector<physical_circuit> on;
  for (auto& [owner, o] : st.owners)
    if (o.committed)
      for (auto& c : o.committed->circuits)
        if (c.device == dev && !st.model->masked({dev, c.a}) && !st.model->masked({dev, c.b}))
          on.push_back(c);
  auto xcs = device_cross_connects(*st.model, on, dev);
  for (auto& [job, op] : st.opus) // an Opus job's rail carries its topology (or its ring)
    if (std::find(op.rails.begin(), op.rails.end(), dev) != op.rails.end()) {
      auto carried = op.orchestrator->carried(st.model->devices[dev].ports);
      xcs.insert(xcs.end(), carried.begin(), carried.end());
    }
  return xcs;
}

void resumed(self_ptr self, uint32_t dev, const xc_diff& repair, size_t foreign) {
  if (auto& m = self->state.config.metrics) {
    const auto& id = device_id(self, dev);
    m->ocs_device_up(id).Set(1);
    m->ocs_cross_connects(id, "loom").Set(double(expected_on(self, dev).size()));
    m->ocs_cross_connects(id, "foreign").Set(double(foreign));
  }
  auto& ds = self->state.devices[dev];
  ds.polling = false;
  ds.resync = false;
  const bool was_down = std::exchange(ds.down, false);
  ds.reason.clear();
  if (was_down || !repair.removes.empty() || !repair.adds.empty())
    record(self, {event_kind::ocs_device_resumed, device_id(self, dev),
                  fmt::format("removed={} added={} foreign={}", repair.removes.size(),
                              repair.adds.size(), foreign)});
  else // read back at start: it carries what the plans say
    spdlog::info("event=ocs_device_in_sync device={} foreign={}", device_id(self, dev), foreign);
}

void resync_failed(self_ptr self, uint32_t dev, const caf::error& err) {
  self->state.devices[dev].polling = false;
  mark_down(self, dev, fmt::format("read-back failed: {}", render(err)));
}

/// What a read-back found, split by owner: Loom's cross-connects join two ports it manages;
/// the rest are someone else's on a shared switch, and a managed port one of them uses is held
/// (not planned over) until a read-back finds it free.
struct read_back {
  std::vector<cross_connect> managed;
  size_t foreign = 0;
};

read_back split_by_owner(fabric_model& model, uint32_t dev,
                         const std::vector<cross_connect>& actual) {
  const auto ports = model.devices[dev].ports;
  auto duplex = [&](uint32_t switch_port) -> std::optional<ocs_port> {
    auto p = switch_port > ports ? switch_port - ports : switch_port;
    if (p < 1 || p > ports)
      return std::nullopt;
    return ocs_port{dev, p};
  };
  for (uint32_t p = 1; p <= ports; ++p)
    model.hold({dev, p}, false);
  read_back out;
  for (auto& x : actual) {
    auto a = duplex(x.in);
    auto b = duplex(x.out);
    const bool ours_a = a && model.managed(*a);
    const bool ours_b = b && model.managed(*b);
    if (ours_a && ours_b) {
      out.managed.push_back(x);
      continue;
    }
    ++out.foreign;
    for (auto& p : {a, b})
      if (p && model.managed(*p))
        model.hold(*p, true);
  }
  return out;
}

/// Reads the device back and applies only what differs from the committed plans, on the
/// ports Loom manages: a shared switch's other cross-connects are never removed.
void resync(self_ptr self, uint32_t dev) {
  auto& st = self->state;
  auto driver = st.drivers.at(dev);
  self->request(driver, caf::infinite, get_atom::value)
    .then(
      [self, dev, driver](const std::vector<cross_connect>& actual) {
        auto found = split_by_owner(*self->state.model, dev, actual);
        const auto ports = self->state.model->devices[dev].ports;
        xc_table table{{ports, ports}};
        table.assign(found.managed);
        auto repair = table.diff_to(expected_on(self, dev));
        const auto foreign = found.foreign;
        if (repair.removes.empty() && repair.adds.empty()) {
          resumed(self, dev, repair, foreign);
          return;
        }
        self->request(driver, caf::infinite, apply_atom::value, repair)
          .then([self, dev, repair, foreign](
                  const apply_report&) { resumed(self, dev, repair, foreign); },
                [self, dev](caf::error& err) { resync_failed(self, dev, err); });
      },
      [self, dev](caf::error& err) { resync_failed(self, dev, err); });
}

/// Whether the device may mask one more alarmed port now (port_masks_per_minute).
bool mask_allowed(self_ptr self, uint32_t dev) {
  auto& seen = self->state.devices[dev].masked_at;
  const auto now = self->clock().now();
  while (!seen.empty() && now - seen.front() >= std::chrono::minutes{1})
    seen.pop_front();
  if (seen.size() >= self->state.config.port_masks_per_minute)
    return false;
  seen.push_back(now);
  return true;
}

/// Alarmed ports not masked yet: masked now (a switch port q is duplex port q or q - P), at
/// most port_masks_per_minute a minute; the rest wait for a later poll, reported once a minute.
void mask_alarms(self_ptr self, uint32_t dev, const std::vector<uint32_t>& failed_ports) {
  const auto ports = self->state.model->devices[dev].ports;
  size_t held = 0;
  for (auto q : failed_ports) {
    auto p = q > ports ? q - ports : q;
    if (p < 1 || p > ports || self->state.model->port_failed({dev, p}))
      continue;
    if (!mask_allowed(self, dev)) {
      ++held;
      continue;
    }
    mask(self, dev, p, [](std::vector<std::string>) {}, [](caf::error) {});
  }
  auto& logged = self->state.devices[dev].limit_logged;
  if (held == 0 || (logged && self->clock().now() - *logged < std::chrono::minutes{1}))
    return;
  logged = self->clock().now();
  spdlog::warn("event=ocs_port_masks_limited device={} alarmed_unmasked={} limit_per_minute={} "
               "reason=\"more ports alarmed at once than fail in practice: the switch or its "
               "agent may be broken or hostile\"",
               device_id(self, dev), held, self->state.config.port_masks_per_minute);
}

void on_health(self_ptr self, uint32_t dev, const driver_health& h) {
  auto& ds = self->state.devices[dev];
  if (!h.connected) {
    ds.polling = false;
    mark_down(self, dev, h.last_error.empty() ? "the device does not answer" : h.last_error);
    return;
  }
  mask_alarms(self, dev, h.failed_ports);
  if (ds.resync || ds.down) {
    resync(self, dev);
    return;
  }
  ds.polling = false;
}

void poll_one(self_ptr self, uint32_t dev) {
  auto& st = self->state;
  auto& ds = st.devices[dev];
  if (ds.polling)
    return;
  ds.polling = true;
  // No deadline of its own: every driver bounds its device's time (TL1: per command and
  // attempt; an agent: its patience), and one poll at a time never piles up behind a slow one.
  self->request(st.drivers.at(dev), caf::infinite, health_atom::value)
    .then([self, dev](const driver_health& h) { on_health(self, dev, h); },
          [self, dev](caf::error& err) {
            self->state.devices[dev].polling = false;
            mark_down(self, dev, render(err));
          });
}

} // namespace

std::string unavailable(self_ptr self, const std::map<uint32_t, xc_diff>& diffs) {
  std::string out;
  for (auto& [dev, diff] : diffs) {
    auto it = self->state.devices.find(dev);
    if (it == self->state.devices.end() || !(it->second.down || it->second.resync))
      continue;
    // A device being read back is not used either: the repair would undo a commit racing it.
    out += fmt::format("{}device {} unavailable: {}", out.empty() ? "" : "; ",
                       device_id(self, dev),
                       it->second.down ? it->second.reason : "not read back yet");
  }
  return out;
}

void apply_failed(self_ptr self, uint32_t device, const caf::error& err) {
  if (self->state.config.health_poll.count() == 0)
    return; // nothing would bring the device back: every window tries it again
  auto code = code_of(err);
  const bool no_answer = err.category() == caf::atom("system")
                         && err.code() == uint8_t(caf::sec::request_timeout);
  if (code == errc::driver_unreachable || code == errc::driver_timeout || no_answer)
    mark_down(self, device, render(err));
  else
    poll_one(self, device); // a denied change: the switch may be raising an alarm
}

void device_metrics_at_zero(self_ptr self) {
  auto& m = self->state.config.metrics;
  if (!m)
    return;
  for (auto& [dev, driver] : self->state.drivers) {
    const auto& id = device_id(self, dev);
    m->ocs_device_up(id);
    m->ocs_cross_connects(id, "loom");
    m->ocs_cross_connects(id, "foreign");
    m->ocs_device_errors(id);
    m->ocs_device_last_error(id);
  }
}

void poll_devices(self_ptr self) {
  for (auto& [dev, driver] : self->state.drivers)
    poll_one(self, dev);
}

void mask(self_ptr self, uint32_t device, uint32_t port,
          std::function<void(std::vector<std::string>)> done,
          std::function<void(caf::error)> failed) {
  auto& st = self->state;
  ocs_port p{device, port};
  st.model->mask(p);
  std::vector<std::string> affected;
  for (auto& [owner, o] : st.owners) {
    if (!o.committed)
      continue;
    auto ports = plan_ports(*o.committed);
    if (std::find(ports.begin(), ports.end(), p) == ports.end())
      continue;
    if (!o.intent && o.serving)
      o.intent = o.serving;
    affected.push_back(owner);
  }
  write_batch batch;
  batch.sync = st.config.sync_writes;
  persist(self, st.store, std::move(batch),
          {event_kind::ocs_port_masked, device_id(self, device),
           fmt::format("port={} owners_replanning={}", port, affected.size())},
          [done, affected] { done(affected); }, std::move(failed));
}

void answer_when_up(self_ptr self, caf::typed_response_promise<fabric_decision> promise,
                    const fabric_decision& d, double delay_s) {
  if (delay_s <= 0) {
    promise.deliver(d);
    return;
  }
  auto& st = self->state;
  const auto token = st.next_link_wait++;
  st.link_waits[token] = {std::move(promise), d};
  self->delayed_send(self,
                     std::chrono::duration_cast<caf::timespan>(
                       std::chrono::duration<double>{delay_s}),
                     deliver_atom::value, token);
}

} // namespace loom::controller_steps
