#include "app/metrics.hpp"

#include <fmt/format.h>
#include <prometheus/exposer.h>

#include "app/process_collector.hpp"
#include "core/error.hpp"

namespace loom {

metrics_endpoint::~metrics_endpoint() = default;

caf::expected<std::unique_ptr<metrics_endpoint>>
metrics_endpoint::start(const std::string& address, const service_metrics& metrics) {
  std::unique_ptr<metrics_endpoint> self{new metrics_endpoint};
  try {
    // One thread: scrapes are rare and the service has two cores to share.
    self->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument,
                      fmt::format("cannot serve metrics on {}: {}", address, e.what()));
  }
  self->process_ = std::make_shared<process_collector>();
  self->exposer_->RegisterCollectable(metrics.registry());
  self->exposer_->RegisterCollectable(self->process_);
  auto ports = self->exposer_->GetListeningPorts();
  self->port_ = ports.empty() ? 0 : ports.front();
  return self;
}

} // namespace loom
