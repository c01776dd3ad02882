#pragma once
// The cluster scheduler's steps, shared by its sources (cluster_scheduler.cpp: admission and
// departures; scheduler_restore.cpp: taking decisions back after a restart;
// scheduler_status.cpp: what operators are told). Internal.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "scheduler/cluster_scheduler.hpp"

namespace loom::scheduler_steps {

using scheduler_ptr = cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state>;
using job_entry = cluster_scheduler_state::job_entry;
using placed_callback = cluster_scheduler_state::placed_callback;

std::string group_name(uint64_t id);

std::vector<std::string> node_names(const std::vector<pool_node>& pool,
                                    const std::vector<int>& nodes);

/// The group's executor, spawned with the group.
group_executor_actor executor_for(scheduler_ptr self, uint64_t id);

/// Algorithm 1 (or the configured chooser), then durable, then answered and executed.
void admit(scheduler_ptr self, rl_job job, placed_callback done);

/// A placed job leaves (finished, failed, cancelled, drifted): its group goes on without it.
/// `done` runs once the departure is durable (or with why it is not).
void depart(scheduler_ptr self, const std::string& id, job_state state,
            const std::string& reason, std::function<void(caf::error)> done);

/// After a departure from `group`: if placing its members again through Algorithm 1 saves
/// more over their remaining lives than their restarts cost, they leave it (moved) and are
/// admitted again (consolidation).
void consolidate(scheduler_ptr self, uint64_t group);

/// The scheduler's meta record as it stands: group counter and nodes out of service.
record_write meta_write(const cluster_scheduler_state& st);

/// Takes back what the store kept (config.restore).
void restore(scheduler_ptr self);

/// A node out of service or back (node_report): durable, then its jobs fail and the fabric
/// hears of it; answered with what changed.
caf::result<node_outcome> report_node(scheduler_ptr self, const node_report& report);

/// After a restart: the nodes the store says are out of service are offered to nobody again
/// (before any job is admitted again).
void restore_failed_nodes(scheduler_ptr self, const std::map<std::string, std::string>& failed);

/// Jobs still pinned to failed nodes fail, and the fabric hears of every failed node (after a
/// restart, once the groups are back).
void isolate_failed_nodes(scheduler_ptr self);

/// Jobs after id `after` (empty: from the first), at most `limit`, in id order.
std::vector<job_status> job_statuses(const cluster_scheduler_state& st, const std::string& after,
                                     uint32_t limit);
std::vector<group_status> group_statuses(const cluster_scheduler_state& st);
scheduler_census census(const cluster_scheduler_state& st);
/// One job in detail; while placed its executor adds how far it got and why it waits.
caf::result<job_status> inspect_job(scheduler_ptr self, const std::string& id);

} // namespace loom::scheduler_steps
