#include "app/metrics.hpp"

#include <fmt/format.h>
#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/exposer.h>

#include <atomic>
#include <cstring>

#include "app/process_collector.hpp"
#include "protocol/error.hpp"

namespace loom {

namespace {

// One service per process: its health is the process's.
std::atomic<service_health> health{service_health::starting};

/// civetweb's hook before prometheus-cpp's handlers: it answers /healthz itself, since the
/// exposer can only serve collectables, always with 200.
int answer_healthz(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (!info || !info->local_uri || std::strcmp(info->local_uri, "/healthz") != 0)
    return 0;
  const auto h = health.load();
  const char* body = h == service_health::ready      ? "ready\n"
                     : h == service_health::starting ? "starting\n"
                     : h == service_health::standby  ? "standby\n"
                                                     : "stopping\n";
  const int status = h == service_health::ready ? 200 : 503;
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n%s",
            status, status == 200 ? "OK" : "Service Unavailable", std::strlen(body), body);
  return status;
}

const CivetCallbacks* healthz_callbacks() {
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c;
    c.begin_request = answer_healthz;
    return c;
  }();
  return &callbacks;
}

} // namespace

void set_health(service_health h) {
  health.store(h);
}

metrics_endpoint::~metrics_endpoint() = default;

caf::expected<std::unique_ptr<metrics_endpoint>>
metrics_endpoint::start(const std::string& address, const service_metrics& metrics) {
  std::unique_ptr<metrics_endpoint> self{new metrics_endpoint};
  try {
    // One thread: scrapes are rare and the service has two cores to share.
    self->exposer_ = std::make_unique<prometheus::Exposer>(address, 1, healthz_callbacks());
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
