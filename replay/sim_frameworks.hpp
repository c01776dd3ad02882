#pragma once
// Replay's edge for WEAVE: simulated RL frameworks and their GPUs. Each permitted phase runs
// for its realized duration (replay/rollout_model) on the virtual clock. A rollout is a fluid:
// it progresses at (GPUs held / GPUs needed) of full speed, reports the tail threshold to its
// executor, and after tail consolidation finishes its remaining responses at full per-GPU speed
// on the few GPUs it keeps, after a migration pause.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "protocol/actors.hpp"
#include "replay/weave_workload.hpp"
#include "types/names.hpp"

namespace loom::replay {

/// What a simulated framework did when, for the report's Gantt of a group (simulated seconds).
enum class activity_kind : uint8_t { rollout, training, sync, staging, tail_migration, crash };

} // namespace loom::replay

template <>
struct loom::enum_names<loom::replay::activity_kind> {
  using activity_kind = loom::replay::activity_kind;
  static constexpr std::array<std::pair<activity_kind, std::string_view>, 6> table{{
    {activity_kind::rollout, "rollout"},
    {activity_kind::training, "training"},
    {activity_kind::sync, "sync"},
    {activity_kind::staging, "staging"},
    {activity_kind::tail_migration, "tail_migration"},
    {activity_kind::crash, "crash"},
  }};
};

namespace loom::replay {

struct activity_span {
  std::string job;
  std::string group;
  activity_kind kind = activity_kind::rollout;
  double start_s = 0;
  double end_s = -1; // -1 while running; == start_s for marks (tail migration, crash)
  int gpus = 0;
};

/// What the simulation measured beyond what the actors report.
struct sim_ledger {
  double rollout_busy_gpu_s = 0;
  double training_busy_gpu_s = 0;
  std::vector<std::string> rejected; // jobs the scheduler refused, with reasons
  int64_t submissions = 0;
  int64_t crashes = 0;
  std::vector<activity_span> activities; // in start order
};

struct sim_frameworks_state {
  static inline const char* name = "sim_frameworks";

  struct job_run {
    size_t index = 0;
    int64_t done = 0;          // iterations completed overall
    bool active = false;       // placed and not crashed or finished
    group_executor_actor executor;
    phase_kind phase = phase_kind::rollout;
    uint64_t version = 0;      // invalidates wakes of superseded phase plans
    uint64_t joins = 0;        // invalidates staging reports of an earlier placement
    caf::timespan last{0};     // when progress was last brought up to date
    realized_iteration draw;
    double progress = 0;       // rollout seconds done at full speed
    double pause_s = 0;        // switch or migration time still to pay
    int need = 0;
    int held = 0;
    bool tail_reported = false;
    bool shrunk = false;
    bool profiling = false;    // the running phase is the job's profiling pass (WEAVE §5 (1))
    double phase_end_s = 0;    // training and sync: absolute end time
    std::string group;         // of the running placement, from its grants
    size_t activity = size_t(-1); // the running phase's entry in the ledger's activities
  };

  loom::config config;
  bool topology_aware_sync = true;
  std::vector<job_arrival> jobs;
  std::shared_ptr<length_draws> draws; // each iteration's response lengths
  double time_scale = 1; // simulated seconds per actor-clock second
  std::map<std::string, job_run> runs;
  cluster_scheduler_actor scheduler; // from connect_atom: it needs this actor as its worker
  std::shared_ptr<sim_ledger> ledger;
};

/// Jobs are submitted to the scheduler it is connected to (connect_atom, sent before the
/// first arrival is due). `time_scale`: simulated seconds per actor-clock second (replay's
/// virtual clock: 1; a live drive compresses real time).
simulated_frameworks_actor::behavior_type
sim_frameworks(simulated_frameworks_actor::stateful_pointer<sim_frameworks_state> self,
               loom::config config, std::vector<job_arrival> jobs,
               std::shared_ptr<length_draws> draws, std::shared_ptr<sim_ledger> ledger,
               double time_scale);

} // namespace loom::replay
