// The cluster scheduler after a restart: every acknowledged decision comes back as it was
// (restore_plan), each executor resumes its group's round robin once the group is needed, and
// only drifted jobs and records that do not fit together go through admission again.

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "scheduler/phase_costs.hpp"
#include "scheduler/scheduler_steps.hpp"

namespace loom::scheduler_steps {

namespace {

std::vector<std::string> pool_ids(const std::vector<pool_node>& pool) {
  std::vector<std::string> out;
  for (auto& n : pool)
    out.push_back(n.id);
  return out;
}

/// One group back in the engine, its members waiting for its executor (spawned when first
/// needed: executor_for); false if it did not fit.
bool restore_group(scheduler_ptr self, restored_group& g, const restore_plan& plan) {
  auto& st = self->state;
  for (auto& m : g.members)
    derive_phase_costs(m.job, st.config.cluster, st.config.policy);
  if (auto why = st.engine->restore(g.id, g.rollout_nodes, g.training_nodes, g.members);
      !why.empty()) {
    spdlog::error("event=group_restore_failed group={} reason=\"{}\"", group_name(g.id), why);
    return false;
  }
  auto& dormant = st.dormant[g.id];
  for (auto& m : g.members) {
    st.put_job(m.job.id, {m.job, job_state::placed, g.id, ""});
    std::optional<job_progress> progress;
    if (auto p = plan.progress.find(m.job.id); p != plan.progress.end()) {
      st.progress[m.job.id] = p->second;
      progress = p->second;
    }
    dormant.push_back({std::move(m), std::move(progress)}); // the engine has its copy
  }
  return true;
}

void readmit(scheduler_ptr self, const rl_job& job) {
  admit(self, job, [id = job.id](caf::expected<placement_reply> p) {
    if (!p)
      spdlog::error("event=job_restore_failed job={} error=\"{}\"", id, render(p.error()));
  });
}

void restore_jobs(scheduler_ptr self, restore_plan& plan) {
  auto& st = self->state;
  for (auto& rec : plan.ended)
    st.put_job(rec.job.id, {rec.job, rec.state, 0, rec.reason, rec.iterations_done});
  size_t placed = 0;
  for (auto& g : plan.groups) {
    if (restore_group(self, g, plan)) {
      placed += g.members.size();
      continue;
    }
    for (auto& m : g.members)
      plan.readmit.push_back(m.job);
  }
  for (auto& job : plan.readmit)
    readmit(self, job);
  spdlog::info("event=scheduler_restored jobs={} groups={} placed={} resumed={} readmitted={} "
               "next_group={}",
               st.config.restore.jobs.size(), st.engine->groups().size(), placed,
               plan.progress.size(), plan.readmit.size(), st.engine->next_group_id());
}

} // namespace

void restore(scheduler_ptr self) {
  auto& st = self->state;
  auto& stored = st.config.restore;
  auto plan = plan_restore(stored, pool_ids(st.engine->rollout_pool()),
                           pool_ids(st.engine->training_pool()));
  for (auto& why : plan.problems)
    spdlog::warn("event=restore_problem reason=\"{}\"", why);
  st.engine->set_next_group_id(plan.next_group);
  restore_failed_nodes(self, plan.failed_nodes);
  if (!stored.jobs.empty())
    restore_jobs(self, plan);
  isolate_failed_nodes(self);
  stored = {}; // taken back; the records are not needed again
}

} // namespace loom::scheduler_steps
