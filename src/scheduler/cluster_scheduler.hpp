#pragma once
// The cluster_scheduler actor: admission and inter-group placement (WEAVE §4.2) around the
// placement_engine core. Every decision is written to the store before anyone hears of it;
// placed jobs are handed to their group's executor, which it spawns with the group (a restored
// group's when first needed) and stops with the group (or with itself). After a restart it
// takes every acknowledged decision back as it was (restore_plan): groups, ids, nodes, turn
// order and iteration counts.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/actors.hpp"
#include "scheduler/placement.hpp"
#include "scheduler/restore_plan.hpp"
#include "types/cluster.hpp"
#include "types/policy.hpp"

namespace loom {

/// How a placement is chosen; empty: WEAVE Algorithm 1. Replay passes its baselines here.
using placement_chooser =
  std::function<placement_decision(const placement_engine&, const rl_job&)>;

struct cluster_scheduler_config {
  loom::cluster cluster;
  weave_policy policy;
  bool migrate_tails = true;
  bool sync_writes = true;
  placement_chooser choose;
  // What the store kept from before a restart (empty on a fresh start).
  stored_schedule restore;
  // Hears of failed and recovered servers; null when the service runs no fabric.
  fabric_controller_actor fabric;
};

struct cluster_scheduler_state {
  static inline const char* name = "cluster_scheduler";

  struct job_entry {
    rl_job job;
    job_state state = job_state::placed;
    uint64_t group = 0;
    std::string reason;
    int64_t iterations_done = 0; // once ended: completed over every placement
  };
  using placed_callback = std::function<void(caf::expected<placement_reply>)>;

  cluster_scheduler_config config;
  std::unique_ptr<placement_engine> engine;
  std::shared_ptr<const std::vector<std::string>> rollout_node_names;
  store_actor store;
  worker_actor worker;
  observer_actor observer;
  std::map<uint64_t, group_executor_actor> executors;
  // Restored groups whose executor is not spawned yet, with what it will be told first (turn
  // order; the place and count kept, if any): a restart at scale made 50,000 executors
  // runnable at once for jobs whose workers had not come back (#49). Whatever needs a group's
  // executor (a worker's first request, an inspection, a new member) spawns it.
  struct dormant_member {
    group_member member;
    std::optional<job_progress> progress;
  };
  std::map<uint64_t, std::vector<dormant_member>> dormant;
  std::map<std::string, job_entry> jobs;        // changed only by put_job and set_job_state
  std::map<job_state, uint64_t> job_counts;     // jobs per state, kept by those two
  std::map<std::string, job_progress> progress; // executors' last durable record per job
  std::map<std::string, std::string> failed_nodes; // out of service: why (durable in meta)
  // Submissions being decided and persisted: a second one of the same name gets the same
  // answer (a submission is idempotent by name).
  std::map<std::string, std::vector<placed_callback>> admitting;

  cluster_scheduler_state() = default;
  cluster_scheduler_state(const cluster_scheduler_state&) = delete;
  cluster_scheduler_state& operator=(const cluster_scheduler_state&) = delete;
  /// The executors go with the scheduler, whatever ended it.
  ~cluster_scheduler_state();

  /// A job's entry, new or replacing its last one.
  void put_job(const std::string& id, job_entry e);
  void set_job_state(job_entry& e, job_state s);
};

/// The pools of a cluster as the placement engine sees them.
placement_engine make_placement_engine(const cluster& c, const weave_policy& policy,
                                       bool migrate_tails);

cluster_scheduler_actor::behavior_type
cluster_scheduler(cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state> self,
                  cluster_scheduler_config config, store_actor store, worker_actor worker,
                  observer_actor observer);

} // namespace loom
