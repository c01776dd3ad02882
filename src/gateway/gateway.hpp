#pragma once
// The gateway actor: every ZeroMQ peer's entry into the actor system, and the live worker edge
// of the WEAVE executors (worker_actor). Sessions are keyed by worker id (a reconnect with the
// same id takes the session over); a worker silent for heartbeat_misses intervals is declared
// dead and its job fails alone (WEAVE §5.3). A phase blocks until granted (WEAVE §5.1): the
// executor's permit answers the worker's PhaseAcquire, whichever comes first; the worker's
// phase reports go straight to the executor that permitted the job's last phase. Malformed
// frames and unknown protocol versions get a typed Error; nothing else happens.

#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/actors.hpp"
#include "core/metrics.hpp"
#include "gateway/grant_matcher.hpp"
#include "gateway/sessions.hpp"
#include "gateway/zmq_server.hpp"

namespace loom {

struct gateway_config {
  bool insecure = false;
  uint32_t heartbeat_ms = 2000;
  uint32_t heartbeat_misses = 3;
  double tail_threshold = 0.8; // WEAVE §4.3
  double default_slo = 1.5;
};

struct gateway_state {
  static inline const char* name = "gateway";
  gateway_config config;
  std::shared_ptr<zmq_server> server; // replies and commands go out through it
  std::shared_ptr<service_metrics> metrics;
  cluster_scheduler_actor scheduler;  // from connect_atom
  fabric_controller_actor fabric;     // null: the service runs no fabric
  session_table sessions;
  grant_matcher grants;
  std::map<std::string, group_executor_actor> executor_of; // job -> sender of its last permit
  std::set<std::string> tail_sent; // jobs whose current rollout hit the tail
};

gateway_actor::behavior_type gateway(gateway_actor::stateful_pointer<gateway_state> self,
                                     gateway_config config, std::shared_ptr<zmq_server> server,
                                     std::shared_ptr<service_metrics> metrics);

} // namespace loom
