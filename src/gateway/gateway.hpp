#pragma once
// The gateway actor: every ZeroMQ peer's entry into the actor system, and the live worker edge
// of the WEAVE executors (worker_actor). Sessions are keyed by worker id and bound to the key,
// role and job they registered with (sessions.hpp); a session acts only on its own job, in its
// role's phases. A worker silent for heartbeat_misses intervals is declared dead and its job
// fails alone (WEAVE §5.3). A phase blocks until granted (WEAVE §5.1): the executor's permit
// answers the worker's PhaseAcquire, whichever comes first; the job's first acquire (or a
// Staged) tells its executor its state is staged. Phase reports go straight to the executor
// the job joined. Every request is answered: malformed frames, unknown protocol versions,
// unknown or ended jobs and refused actions get a typed Error.

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gateway/grant_matcher.hpp"
#include "gateway/rate_limiter.hpp"
#include "gateway/sessions.hpp"
#include "gateway/zmq_server.hpp"
#include "metrics/metrics.hpp"
#include "protocol/actors.hpp"
#include "scheduler/sync_plan.hpp"

namespace loom {

struct gateway_config {
  bool insecure = false;
  uint32_t heartbeat_ms = 2000;
  uint32_t heartbeat_misses = 3;
  uint32_t frames_per_s_per_key = 20'000; // frames of no session, per key; bursts of twice that
  uint32_t frames_per_s_per_session = 20'000; // a registered session's, per connection
  uint32_t sessions_per_key = 4096;
  std::map<std::string, uint32_t> stats_interval_ms; // per generation deployment: its tick
  double tail_threshold = 0.8; // WEAVE §4.3
  double default_slo = 1.5;
  pod_map pods; // the fabric's PoDs by node: sync routes follow OrchestrRL App. E's forest
};

/// What the gateway knows of a job: the executor it joined (its phase reports go there) and
/// what it told that executor.
struct job_link {
  group_executor_actor executor;
  bool staged = false;    // the executor heard the job's state is staged
  bool tail_sent = false; // its current rollout reached the tail threshold (WEAVE §4.3)
};

struct gateway_state {
  static inline const char* name = "gateway";
  gateway_config config;
  std::shared_ptr<zmq_server> server; // replies and commands go out through it
  std::shared_ptr<service_metrics> metrics;
  cluster_scheduler_actor scheduler;  // from connect_atom
  fabric_controller_actor fabric;     // null: the service runs no fabric
  std::map<std::string, gen_controller_actor> deployments; // generation, by name
  std::map<std::string, agent_driver_actor> agents;        // OCS devices agents drive, by id
  session_table sessions;
  grant_matcher grants;
  std::map<std::string, job_link> jobs;
  rate_limiter limiter{0, 0};         // frames of no session, by key
  rate_limiter session_limiter{0, 0}; // a registered session's frames, by connection
  // A limited key's frames are logged once a second at most: key -> (last line, dropped since).
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, uint64_t>> limited_log;
  // loom_gateway_messages_total's counters, [in, out] by body field number, each looked up
  // once: the registry's lookup builds and hashes a label map per call, per frame before.
  std::array<std::vector<prometheus::Counter*>, 2> message_counters;
  bool stopping = false; // the service is going away: sessions were told, requests refused
  std::chrono::steady_clock::time_point sweep_due; // when the liveness sweep should run next
};

gateway_actor::behavior_type gateway(gateway_actor::stateful_pointer<gateway_state> self,
                                     gateway_config config, std::shared_ptr<zmq_server> server,
                                     std::shared_ptr<service_metrics> metrics);

} // namespace loom
