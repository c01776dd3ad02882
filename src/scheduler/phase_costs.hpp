#pragma once
// What switching and synchronising phases cost, from the cluster and the job (pure).

#include "types/cluster.hpp"
#include "types/policy.hpp"
#include "types/scheduler.hpp"

namespace loom {

struct switch_costs {
  double warm_s = 0; // state resident in host DRAM (WEAVE §5.1 warm start)
  double cold_s = 0; // control plane rebuilt, state fetched from storage
};

/// What a member's rollout and training cost to start after another job's phase.
struct phase_switches {
  switch_costs rollout;
  switch_costs training;
};

/// WEAVE §3 C3 / Fig. 4: a node's working set over PCIe (warm) or storage plus
/// re-initialisation (cold).
switch_costs phase_switch_costs(double working_set_gb, int gpus_on_node, const weave_policy& p);

/// What a member's rollout and training cost to start after another job's phase on its
/// group's GPUs (WEAVE §3 C3): its rollout GPUs per node, and its training state spread over
/// the group's training pool (footnote 2).
phase_switches member_switches(const rl_job& job, int gpus_per_rollout_node,
                               int gpus_per_training_node, int group_training_gpus,
                               const weave_policy& p);

/// WEAVE §5.1 Init: the one-time cold start of a joined job, staging its rollout and training
/// state into host DRAM side by side.
inline double staging_s(const phase_switches& s) {
  return s.rollout.cold_s > s.training.cold_s ? s.rollout.cold_s : s.training.cold_s;
}

/// WEAVE §5.2: time to bring `model_gb` of updated weights from the training pool to
/// `rollout_nodes` rollout nodes over a `cross_link_gbps` (Gbit/s) link. Flat (veRL-style
/// AllGather): every rollout node fetches its own copy across the link. Topology-aware: one
/// copy is scattered across the link by parallel point-to-point streams, then broadcast inside
/// the rollout cluster at `intra_cluster_gbps`.
double model_sync_s(double model_gb, int rollout_nodes, double cross_link_gbps,
                    double intra_cluster_gbps, bool topology_aware);

/// How long a permitted phase may run (WEAVE §5.3 stragglers): its worst case on the GPUs it
/// was granted plus its switch, at least `min_phase_s`, times the policy's factors. Past
/// `overrun_s` it is reported and its elapsed time feeds the drift check; past `stuck_s` its
/// job fails alone.
struct phase_deadlines {
  double overrun_s = 0;
  double stuck_s = 0;
};

/// Below a second the worker's own bookkeeping and the report's round trip dominate a phase.
constexpr double min_phase_s = 1.0;

phase_deadlines deadlines_of(const rl_job& job, const phase_grant& g, int group_training_gpus,
                             const weave_policy& p);

/// Fills in what a job's phases cost on this cluster beyond its profile: sync_s, over the
/// cross-cluster link to its rollout nodes. Its warm starts depend on the group it joins
/// (member_switches).
void derive_phase_costs(rl_job& job, const cluster& c, const weave_policy& p);

} // namespace loom
