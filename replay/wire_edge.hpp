#pragma once
// `loom drive`'s edge: replay's simulated frameworks (sim_frameworks, unchanged) against a
// live `loom serve`. The wire scheduler stands in for the cluster scheduler towards them and
// submits each arriving job over loom.v1 (admin key); each placed job gets a wire job, a worker
// session (driver role) that stands in for its group executor: it stages the job when the
// simulated Init ends, acquires each phase and hands the permit to the simulated framework,
// releases the phase when the framework reports it done, and reports the tail threshold. What
// the service decides and how iterations run is recorded in replay's terms (policy_log), on
// the frameworks' compressed clock.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "loom/client.hpp"
#include "protocol/actors.hpp"
#include "replay/weave_replay.hpp"
#include "scheduler/iteration_ledger.hpp"
#include "scheduler/placement.hpp"

namespace loom::replay {

/// What the wire actors share with `loom drive`'s main thread.
struct drive_context {
  client_options admin;            // submissions
  client_options worker;           // the jobs' worker sessions (a driver key)
  loom::config config;             // the scenario's cluster and policy
  double time_scale = 1;           // simulated seconds per real second
  caf::timespan origin{0};         // actor-clock time the drive started
  std::shared_ptr<placement_engine> pools; // the cluster's nodes, for costs and GPUs

  std::mutex mutex;                // what follows
  policy_log log;
  std::map<std::string, job_state> last_state; // per job, as the service last said
  std::vector<double> release_lag_s; // each PhaseRelease's round trip, simulated seconds
  std::atomic<int64_t> wire_errors{0};

  /// Simulated nanoseconds since the drive started (the frameworks' clock).
  int64_t sim_ns(caf::timespan clock_now) const;
};

struct wire_scheduler_state {
  static inline const char* name = "wire_scheduler";
  std::shared_ptr<drive_context> ctx;
  std::unique_ptr<client> admin;
  simulated_frameworks_actor frameworks;
  std::map<std::string, wire_job_actor> jobs;
  std::map<uint64_t, std::function<void(std::optional<v1::Envelope>)>> answers;
  uint64_t next_token = 1;
};

wire_scheduler_actor::behavior_type
wire_scheduler(wire_scheduler_actor::stateful_pointer<wire_scheduler_state> self,
               std::shared_ptr<drive_context> ctx, simulated_frameworks_actor frameworks);

struct wire_job_state {
  static inline const char* name = "wire_job";
  std::shared_ptr<drive_context> ctx;
  rl_job job;
  std::string group;
  int training_gpus = 0;
  std::unique_ptr<client> session;
  std::optional<iteration_ledger> ledger;
  simulated_frameworks_actor frameworks;
  wire_scheduler_actor scheduler;
  std::map<uint64_t, std::function<void(std::optional<v1::Envelope>)>> answers;
  uint64_t next_token = 1;
  bool ended = false;
};

/// `group`, `training_gpus`: where the service placed the job.
wire_job_actor::behavior_type wire_job(wire_job_actor::stateful_pointer<wire_job_state> self,
                                       std::shared_ptr<drive_context> ctx, rl_job job,
                                       std::string group, int training_gpus,
                                       simulated_frameworks_actor frameworks,
                                       wire_scheduler_actor scheduler);

} // namespace loom::replay
