#include "app/device_probe.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"

namespace loom {

namespace {

/// `found`: the cross-connects the read-back returned, before the fabric controller repairs
/// the device (it may have by the time the geometry comes back).
void report(const ocs_device& dev, const driver_health& h, size_t found) {
  const auto expected = uint32_t(dev.ports);
  if (h.inputs != expected || h.outputs != expected) {
    spdlog::warn("event=ocs_probe_mismatch device={} address={} size={}x{} expected={}x{} "
                 "reason=\"the config's ports differ from the switch's; plans assume the "
                 "config\"",
                 dev.id, dev.address, h.inputs, h.outputs, expected, expected);
    return;
  }
  spdlog::info("event=ocs_probe device={} address={} size={}x{} cross_connects={}", dev.id,
               dev.address, h.inputs, h.outputs, found);
}

} // namespace

void probe_devices(caf::actor_system& sys, const std::vector<ocs_device>& devices,
                   const std::map<std::string, ocs_driver_actor>& drivers) {
  for (auto& dev : devices) {
    auto driver = drivers.find(dev.id);
    if (dev.driver != driver_kind::tl1 || driver == drivers.end())
      continue;
    // Reading back logs in (with its retries) before it answers; allow every attempt.
    const auto patience = std::chrono::milliseconds{2 * dev.timeout_ms * dev.attempts + 1000};
    sys.spawn([dev, patience, d = driver->second](caf::event_based_actor* self) {
      auto failed = [dev](caf::error& err) {
        spdlog::warn("event=ocs_probe_failed device={} address={} error=\"{}\"", dev.id,
                     dev.address, render(err));
      };
      self->request(d, patience, get_atom::value)
        .then(
          [self, dev, patience, d, failed](const std::vector<cross_connect>& found) {
            self->request(d, patience, health_atom::value)
              .then([dev, n = found.size()](const driver_health& h) { report(dev, h, n); },
                    failed);
          },
          failed);
    });
  }
}

} // namespace loom
