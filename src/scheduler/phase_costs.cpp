#include "scheduler/phase_costs.hpp"

#include <algorithm>

#include "scheduler/placement.hpp"

namespace loom {

switch_costs phase_switch_costs(double working_set_gb, int gpus_on_node, const weave_policy& p) {
  switch_costs c;
  c.warm_s = working_set_gb / (std::max(1, gpus_on_node) * p.warm_start_gbps_per_gpu);
  c.cold_s = p.cold_start_init_s + working_set_gb / p.cold_start_gbps;
  return c;
}

phase_switches member_switches(const rl_job& job, int gpus_per_rollout_node,
                               int gpus_per_training_node, int group_training_gpus,
                               const weave_policy& p) {
  const int rollout_per_node = std::min(job.rollout_gpus, gpus_per_rollout_node);
  const int training_per_node = std::min(group_training_gpus, gpus_per_training_node);
  return {phase_switch_costs(job.rollout_memory_gb, rollout_per_node, p),
          phase_switch_costs(training_memory_per_node(job, group_training_gpus),
                             training_per_node, p)};
}

double model_sync_s(double model_gb, int rollout_nodes, double cross_link_gbps,
                    double intra_cluster_gbps, bool topology_aware) {
  const double gbit = model_gb * 8;
  if (gbit <= 0 || rollout_nodes <= 0)
    return 0;
  if (!topology_aware)
    return rollout_nodes * gbit / cross_link_gbps;
  // The broadcast stage only runs when there is more than one receiving node.
  return gbit / cross_link_gbps + (rollout_nodes > 1 ? gbit / intra_cluster_gbps : 0.0);
}

phase_deadlines deadlines_of(const rl_job& job, const phase_grant& g, int group_training_gpus,
                             const weave_policy& p) {
  double worst = job.sync_s;
  if (g.phase == phase_kind::rollout)
    worst = job.rollout_s * job.rollout_gpus / std::max(1, g.gpus);
  else if (g.phase == phase_kind::training)
    worst = job.training_s * job.training_gpus / std::max(1, group_training_gpus);
  const double expected = std::max(min_phase_s, worst + g.switch_s);
  return {expected * p.overrun_factor, expected * p.stuck_factor};
}

void derive_phase_costs(rl_job& job, const cluster& c, const weave_policy& p) {
  const int rollout_per_node = gpus_per_node(c.rollout);
  const int rollout_nodes = (job.rollout_gpus + rollout_per_node - 1) / rollout_per_node;
  job.sync_s = model_sync_s(job.model_gb, rollout_nodes, c.cross_link_gbps, p.intra_cluster_gbps,
                            p.topology_aware_sync);
}

} // namespace loom
