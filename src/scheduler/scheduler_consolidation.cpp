// The cluster scheduler's consolidation step: the plan (consolidation.hpp) from what the
// scheduler knows of each member, then carried out with the messages every placement uses: the
// members leave their group (moved) and are admitted again, their executors and workers told
// as for any departure and join.

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "scheduler/consolidation.hpp"
#include "scheduler/phase_costs.hpp"
#include "scheduler/scheduler_steps.hpp"

namespace loom::scheduler_steps {

namespace {

int64_t iterations_done(const cluster_scheduler_state& st, const std::string& job) {
  auto it = st.progress.find(job);
  return it == st.progress.end() ? 0 : it->second.iterations_done;
}

/// A member with a known end: its remaining iterations at its solo time (a lower bound on its
/// remaining life), and a restart's staging plus the iteration it interrupts.
std::map<std::string, member_outlook> outlook_of(const cluster_scheduler_state& st,
                                                 const co_execution_group& g) {
  std::map<std::string, member_outlook> out;
  const auto& engine = *st.engine;
  for (auto& m : g.members) {
    const auto& job = m.job;
    const int64_t left = job.iterations - iterations_done(st, job.id);
    if (job.iterations <= 0 || left <= 1)
      continue; // runs until stopped, or about to end: never moved
    auto switches = member_switches(job, gpus_per_node(engine.rollout_pool()),
                                    gpus_per_node(engine.training_pool()), g.training_gpus,
                                    st.config.policy);
    out[job.id] = {double(left) * job.solo_s(), staging_s(switches) + job.solo_s()};
  }
  return out;
}

} // namespace

void consolidate(scheduler_ptr self, uint64_t group) {
  auto& st = self->state;
  if (!st.config.policy.consolidate || st.config.choose)
    return; // off, or a baseline's chooser decides placements
  auto g = st.engine->groups().find(group);
  if (g == st.engine->groups().end())
    return;
  auto plan = plan_regrouping(*st.engine, group, outlook_of(st, g->second));
  if (!plan.worthwhile())
    return;
  spdlog::info("event=consolidation group={} jobs={} saving_per_hour={:.2f} horizon_h={:.1f} "
               "restart_cost={:.2f}",
               group_name(group), plan.moves.size(), plan.saving_per_hour, plan.horizon_h,
               plan.restart_cost);
  const auto reason = fmt::format("consolidation: {} placed again saves ${:.2f}/h for {:.1f} h",
                                  group_name(group), plan.saving_per_hour, plan.horizon_h);
  // All leave first, then each is admitted in turn order: the engine goes through the states
  // the plan was tried on.
  std::vector<rl_job> moving;
  for (auto& job : plan.moves) {
    moving.push_back(job.continued(iterations_done(st, job.id)));
    depart(self, job.id, job_state::moved, reason, [](caf::error) {});
  }
  for (auto& job : moving)
    admit(self, job, [self, id = job.id](caf::expected<placement_reply> r) {
      if (r && r->kind != placement_kind::rejected)
        return;
      spdlog::error("event=consolidation_replacement_failed job={} error=\"{}\"", id,
                    r ? r->reason : render(r.error()));
      if (self->state.worker)
        self->send(self->state.worker, leave_atom::value, id, job_state::rejected);
    });
}

} // namespace loom::scheduler_steps
