#pragma once
// WEAVE's plain data (no CAF): the RL job as the scheduler sees it, the phases it cycles
// through, the run permits of its group, the placement decisions, and what the scheduler
// reports. Messages between the scheduler, its group executors, the workers and observers.

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types/names.hpp"

namespace loom {

/// WEAVE §4.2's SLO: an iteration of `iteration_s` within `slo` times the solo time it is
/// judged against. The one test admission, the drift check, the live metric and the replay
/// report apply, with one tolerance for rounding, so none counts met what another counts
/// missed; which solo time is the basis is each caller's to say.
inline bool within_slo(double iteration_s, double slo, double solo_s) {
  return iteration_s <= slo * solo_s * (1 + 1e-9);
}

/// An RL job as the scheduler sees it (WEAVE §4.2): its GPU needs, host-memory working sets,
/// SLO, and worst-case phase durations profiled at the maximum token limit.
struct rl_job {
  std::string id;
  int rollout_gpus = 0;
  int training_gpus = 0;
  double rollout_memory_gb = 0; // working set cached per rollout node (warm start)
  double training_memory_gb = 0; // training state cached per training node
  double slo = 1.5;              // tolerated slowdown of an iteration vs. solo
  double rollout_s = 0;          // worst-case rollout phase
  double training_s = 0;         // worst-case training phase at `training_gpus`
  double sync_s = 0;             // model sync after training (derived from model_gb)
  std::string name;
  std::string model;
  int max_response_tokens = 0;
  int batch_size = 0;
  bool multi_turn = false;
  double model_gb = 0;           // weights to sync to the rollout pool every iteration
  int64_t iterations = 0;        // iterations to run; 0: until finished or cancelled
  int64_t iterations_before = 0; // completed in placements it left (a move carries its count)
  // WEAVE §5 (1)(2): its phase durations and host-memory footprints are not given but
  // measured by one solo profiling pass at the maximum token limit before Algorithm 1 places it.
  bool profile = false;

  /// Iteration time alone on dedicated pools: rollout -> train -> sync.
  double solo_s() const { return rollout_s + training_s + sync_s; }

  /// The job placed again after `done` more iterations (a move, drift, or a restart that
  /// re-admits it): what it has left to run, and its count so far.
  rl_job continued(int64_t done) const {
    rl_job next = *this;
    if (iterations > 0)
      next.iterations = std::max<int64_t>(1, iterations - done);
    next.iterations_before += done;
    return next;
  }
};

/// A job in a co-execution group: the job and the rollout nodes (rollout-pool indices) it is
/// pinned to. The one struct for this concept: placement, the executor and their cores share it.
struct group_member {
  rl_job job;
  std::vector<int> rollout_nodes;
};

enum class phase_kind : uint8_t { rollout, training, sync };

template <>
struct enum_names<phase_kind> {
  static constexpr std::array<std::pair<phase_kind, std::string_view>, 3> table{{
    {phase_kind::rollout, "rollout"},
    {phase_kind::training, "training"},
    {phase_kind::sync, "sync"},
  }};
};

/// A run permit (WEAVE §5.1): the job may run the phase now on `gpus` GPUs, after `switch_s`
/// of loading.
/// Where a permitted phase runs: device indices on one node.
struct node_devices {
  std::string node;
  std::vector<int> devices;
};

struct phase_grant {
  std::string job;
  phase_kind phase = phase_kind::rollout;
  int gpus = 0;
  double switch_s = 0;
  bool cold = false;
  // Stamped by the executor that permits it: a release names them back, so that one sent again
  // after a restart is known for an iteration end already counted.
  int64_t iteration = 0; // of the job's placement, from 1
  std::string group;
  // The GPUs, by node: a rollout's own on its rollout nodes; training on the whole pool (its
  // DP degree matched to the pool, WEAVE footnote 2); none for sync.
  std::vector<node_devices> devices;
  // WEAVE §5 (1): the job's one-shot profiling pass, run at the maximum token limit and not
  // counted as an iteration; its measured phases and footprints place it afterwards.
  bool profiling = false;
};

/// What a job's profiling pass measured (WEAVE §5 (2)): the longest phases its workers
/// reported and the host memory their state holds between phases.
struct job_profile {
  std::string job;
  double rollout_s = 0;
  double training_s = 0;
  double rollout_memory_gb = 0;
  double training_memory_gb = 0;
};

/// A running rollout's GPUs change: shrunk to its tail, or grown as GPUs free up.
struct gpu_resize {
  std::string job;
  int gpus = 0;
  std::vector<node_devices> devices; // all it holds now
};

/// How Algorithm 1 placed a job (WEAVE §4.2).
enum class placement_kind : uint8_t { direct_packing, rollout_scaling, new_group, rejected };

template <>
struct enum_names<placement_kind> {
  static constexpr std::array<std::pair<placement_kind, std::string_view>, 4> table{{
    {placement_kind::direct_packing, "direct_packing"},
    {placement_kind::rollout_scaling, "rollout_scaling"},
    {placement_kind::new_group, "new_group"},
    {placement_kind::rejected, "rejected"},
  }};
};

/// Where a job stands with the scheduler.
enum class job_state : uint8_t {
  placed,
  rejected,
  finished,
  failed,
  cancelled,
  drifted, // stopped to be placed again with its measured phases (WEAVE §5.3)
  moved,   // stopped to be placed again where it costs less (consolidation)
  profiled, // its one-shot profiling pass ended: placed by Algorithm 1 with what it measured
};

/// The job left its group only to be placed again: its workers wait for the new group.
constexpr bool placed_again(job_state s) {
  return s == job_state::drifted || s == job_state::moved || s == job_state::profiled;
}

template <>
struct enum_names<job_state> {
  static constexpr std::array<std::pair<job_state, std::string_view>, 8> table{{
    {job_state::placed, "placed"},
    {job_state::rejected, "rejected"},
    {job_state::finished, "finished"},
    {job_state::failed, "failed"},
    {job_state::cancelled, "cancelled"},
    {job_state::drifted, "drifted"},
    {job_state::moved, "moved"},
    {job_state::profiled, "profiled"},
  }};
};

/// What changed the cluster: a placement decision or a job's departure.
enum class cluster_event : uint8_t {
  direct_packing,
  rollout_scaling,
  new_group,
  rejected,
  left,    // finished, failed or cancelled
  drifted, // stopped to be re-placed with its measured phases (WEAVE §5.3)
  moved,   // stopped to be re-placed where it costs less (consolidation)
  profiled, // its profiling pass ended: placed with what it measured (WEAVE §5 (1)(2))
};

template <>
struct enum_names<cluster_event> {
  static constexpr std::array<std::pair<cluster_event, std::string_view>, 8> table{{
    {cluster_event::direct_packing, "direct_packing"},
    {cluster_event::rollout_scaling, "rollout_scaling"},
    {cluster_event::new_group, "new_group"},
    {cluster_event::rejected, "rejected"},
    {cluster_event::left, "left"},
    {cluster_event::drifted, "drifted"},
    {cluster_event::moved, "moved"},
    {cluster_event::profiled, "profiled"},
  }};
};

/// The cluster record a job's leaving its group makes.
constexpr cluster_event departure_of(job_state s) {
  return s == job_state::drifted ? cluster_event::drifted
         : s == job_state::moved    ? cluster_event::moved
         : s == job_state::profiled ? cluster_event::profiled
                                    : cluster_event::left;
}

/// The cluster event a placement decision is.
constexpr cluster_event event_of(placement_kind k) {
  switch (k) {
    case placement_kind::direct_packing: return cluster_event::direct_packing;
    case placement_kind::rollout_scaling: return cluster_event::rollout_scaling;
    case placement_kind::new_group: return cluster_event::new_group;
    case placement_kind::rejected: return cluster_event::rejected;
  }
  return cluster_event::rejected;
}

/// A decision that placed a job (not a rejection or a departure).
constexpr bool is_placement(cluster_event e) {
  return e == cluster_event::direct_packing || e == cluster_event::rollout_scaling
         || e == cluster_event::new_group;
}

/// The answer to a submitted job, sent once the decision is durable.
struct placement_reply {
  std::string job;
  placement_kind kind = placement_kind::rejected;
  std::string group; // group id, empty when rejected
  std::vector<std::string> rollout_nodes;
  std::vector<std::string> training_nodes;
  double delta_cost_per_hour = 0;
  double cost_per_hour = 0;       // the cluster's provisioning cost after the decision
  std::string reason;             // why it was rejected
  double group_cost_per_hour = 0; // the group's own nodes after the decision
};

/// Where a job stands in its group's round robin (WEAVE §4.3): its place in the turn order, the
/// round of its next rollout and the iterations it completed in this placement. Kept in the
/// store when its workers first say its state is staged and at every iteration end, so that a
/// restarted service resumes it in the same turn with the same count.
struct job_progress {
  std::string job;
  std::string group;
  uint64_t position = 0;
  uint64_t round = 0;
  int64_t iterations_done = 0;
};

/// An operator (or a node health monitor) reports a cluster node out of service, or back.
struct node_report {
  std::string node;
  bool failed = true;
  std::string reason;
};

/// What a node report changed: the jobs pinned to the node, failed (WEAVE §5.3: a recovered job
/// comes back as a new arrival), and the fabric owners that re-plan around it at their next
/// window (RFabric §5.4 (i)).
struct node_outcome {
  std::vector<std::string> failed_jobs;
  std::vector<std::string> replanning;
};

/// A job joined a group (executor -> worker edge). Its first phase waits until its workers say
/// its state is staged (WEAVE §5.1 Init); `staging_s` is the cold start the executor's schedule
/// expects, for edges that model it (replay's simulated frameworks).
struct member_joined {
  std::string job;
  std::string group;
  double staging_s = 0;
};

/// A job as its group's executor sees it.
struct member_status {
  std::string job;
  int64_t iterations_done = 0;
  phase_kind phase = phase_kind::rollout; // the phase it runs or waits for
  bool staged = false;                   // its workers said its state is staged
  bool running = false;                  // the phase is granted and not yet released
  std::string waiting;                   // why it waits, empty while it runs
  int overruns = 0;                      // phases past the policy's overrun factor
};

struct job_status {
  std::string job;
  job_state state = job_state::placed;
  std::string group;
  double slo = 0;
  double solo_s = 0;
  std::string reason;
  int64_t iterations = 0; // to run in all; 0: until finished or cancelled
  int64_t iterations_completed = 0; // over every placement, also once it ended
  // Filled when one job is inspected while placed: where it runs and how far it got.
  std::vector<std::string> rollout_nodes;
  std::vector<std::string> training_nodes;
  member_status member;
};

/// How many jobs are in each state, how many groups run and how many executors they have (a
/// restored group's is spawned when first needed): what /metrics shows each second, counted
/// without copying any job's status (at 100,000 jobs that copy kept an idle service busy).
struct scheduler_census {
  std::map<job_state, uint64_t> jobs;
  uint64_t groups = 0;
  uint64_t executors = 0;
};

struct group_status {
  std::string group;
  std::vector<std::string> jobs;
  std::vector<std::string> rollout_nodes;
  std::vector<std::string> training_nodes;
  bool saturated = false;
  double cost_per_hour = 0;              // the group's own nodes
  std::vector<int64_t> iterations_done;  // per job, in the order of `jobs` (the turn order)
};

/// One completed iteration of a job under its group's schedule (end of its sync).
struct iteration_record {
  std::string job;
  std::string group;
  int64_t index = 0;         // 0 is the first iteration after (re-)admission
  int64_t end_ns = 0;        // actor-clock time, ns since the clock's epoch
  double duration_s = 0;     // since the previous iteration ended (or since admission)
  double solo_s = 0;         // the same work alone on dedicated pools, as the worker measured it
  double planned_solo_s = 0; // the job's profiled worst-case solo iteration
  double slo = 0;
};

/// The cluster after a scheduler decision or a job's departure.
struct cluster_record {
  int64_t time_ns = 0;
  cluster_event event = cluster_event::rejected;
  std::string job;
  double cost_per_hour = 0;
  int rollout_gpus = 0;
  int training_gpus = 0;
  double decision_us = 0; // wall-clock time of the placement search (0 for departures)
};

} // namespace loom
