#pragma once
// The /metrics HTTP endpoint (prometheus-cpp's pull exposer) and /healthz beside it.

#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "metrics/metrics.hpp"

namespace prometheus {
class Exposer;
}

namespace loom {

class process_collector;

/// What /healthz answers: 503 "starting" until the service is ready (its actors restored and
/// its gateway listening), 200 "ready", then 503 "stopping" once a stop was asked for, so a
/// load balancer or systemd sends nothing to a service that cannot take it.
/// What /healthz answers: 200 "ready" only while the service serves its gateway; a standby
/// replica ([ha]) answers 503 "standby", so a load balancer sends clients to the leader.
enum class service_health { starting, ready, stopping, standby };
void set_health(service_health h);

class metrics_endpoint {
public:
  ~metrics_endpoint();

  /// Binds `address` (host:port, port 0 = any free port) and serves the registry and the
  /// process metrics on /metrics, and the service's health on /healthz.
  static caf::expected<std::unique_ptr<metrics_endpoint>>
  start(const std::string& address, const service_metrics& metrics);

  /// The port actually bound.
  int port() const { return port_; }

private:
  metrics_endpoint() = default;
  std::shared_ptr<process_collector> process_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

} // namespace loom
