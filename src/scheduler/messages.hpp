#pragma once
// What the scheduler, its group executors, the workers and observers tell each other.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace loom {

/// The answer to a submitted job, sent once the decision is durable.
struct placement_reply {
  std::string job;
  std::string kind;     // direct_packing | rollout_scaling | new_group | rejected
  std::string group;    // group id, empty when rejected
  std::vector<std::string> rollout_nodes;
  std::vector<std::string> training_nodes;
  double delta_cost_per_hour = 0;
  double cost_per_hour = 0; // the cluster's provisioning cost after the decision
  std::string reason;       // why it was rejected
};

struct job_status {
  std::string job;
  std::string state; // placed | rejected | finished | failed | cancelled
  std::string group;
  double slo = 0;
  double solo_s = 0;
  std::string reason;
};

struct group_status {
  std::string group;
  std::vector<std::string> jobs;
  std::vector<std::string> rollout_nodes;
  std::vector<std::string> training_nodes;
  bool saturated = false;
  double cost_per_hour = 0;
};

/// One completed iteration of a job under its group's schedule (end of its sync).
struct iteration_record {
  std::string job;
  std::string group;
  int64_t index = 0;       // 0 is the first iteration after (re-)admission
  int64_t end_ns = 0;      // actor-clock time, ns since the clock's epoch
  double duration_s = 0;   // since the previous iteration ended (or since admission)
  double solo_s = 0;       // the same work alone on dedicated pools, as the worker measured it
  double planned_solo_s = 0; // the job's profiled worst-case solo iteration
  double slo = 0;
};

/// The cluster after a scheduler decision or a job's departure.
struct cluster_record {
  int64_t time_ns = 0;
  std::string event; // direct_packing | rollout_scaling | new_group | rejected | left | drifted
  std::string job;
  double cost_per_hour = 0;
  int rollout_gpus = 0;
  int training_gpus = 0;
  double decision_us = 0; // wall-clock time of the placement search (0 for departures)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, placement_reply& x) {
  return f(caf::meta::type_name("placement_reply"), x.job, x.kind, x.group, x.rollout_nodes,
           x.training_nodes, x.delta_cost_per_hour, x.cost_per_hour, x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_status& x) {
  return f(caf::meta::type_name("job_status"), x.job, x.state, x.group, x.slo, x.solo_s,
           x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_status& x) {
  return f(caf::meta::type_name("group_status"), x.group, x.jobs, x.rollout_nodes,
           x.training_nodes, x.saturated, x.cost_per_hour);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, iteration_record& x) {
  return f(caf::meta::type_name("iteration_record"), x.job, x.group, x.index, x.end_ns,
           x.duration_s, x.solo_s, x.planned_solo_s, x.slo);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_record& x) {
  return f(caf::meta::type_name("cluster_record"), x.time_ns, x.event, x.job, x.cost_per_hour,
           x.rollout_gpus, x.training_gpus, x.decision_us);
}

} // namespace loom
