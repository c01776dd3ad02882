#pragma once
// The gateway actor: every ZeroMQ peer's entry into the actor system, and the live worker edge
// of the WEAVE executors (worker_actor). Sessions are keyed by worker id (a reconnect with the
// same id takes the session over); a worker silent for heartbeat_misses intervals is declared
// dead and its job fails alone (WEAVE §5.3). A phase blocks until granted (WEAVE §5.1): the
// executor's permit answers the worker's PhaseAcquire, whichever comes first. Malformed frames
// and unknown protocol versions get a typed Error; nothing else happens.

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/actors.hpp"
#include "core/metrics.hpp"
#include "gateway/zmq_server.hpp"

namespace loom {

/// What the gateway talks to, filled in by `serve` before the I/O thread starts.
struct gateway_links {
  std::atomic<zmq_server*> server{nullptr};
  cluster_scheduler_actor scheduler;
  fabric_controller_actor fabric;
};

struct gateway_config {
  bool insecure = false;
  uint32_t heartbeat_ms = 2000;
  uint32_t heartbeat_misses = 3;
  double tail_threshold = 0.8; // WEAVE §4.3
  double default_slo = 1.5;
};

struct gateway_state {
  static inline const char* name = "gateway";
  struct session {
    std::string identity; // the ZeroMQ routing id of its current connection
    std::string role;
    std::string node;
    std::string job;
    caf::actor_clock::time_point last_seen;
  };
  struct waiter {
    std::string identity;
    uint64_t request_id = 0;
    caf::actor_clock::time_point since;
  };
  gateway_config config;
  std::shared_ptr<gateway_links> links;
  std::shared_ptr<service_metrics> metrics;
  std::map<std::string, session> sessions;          // by worker id
  std::map<std::string, std::string> worker_of;     // identity -> worker id
  std::map<std::pair<std::string, int>, std::vector<waiter>> acquiring; // (job, phase)
  std::map<std::pair<std::string, int>, phase_grant> granted;           // not yet acquired
  std::set<std::string> tail_sent;                  // jobs whose current rollout hit the tail
};

gateway_actor::behavior_type gateway(gateway_actor::stateful_pointer<gateway_state> self,
                                     gateway_config config, std::shared_ptr<gateway_links> links,
                                     std::shared_ptr<service_metrics> metrics);

} // namespace loom
