#include "scheduler/group_executor.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/inspect.hpp"
#include "scheduler/placement.hpp"

namespace loom {

namespace {

using executor_ptr = group_executor_actor::stateful_pointer<group_executor_state>;

int64_t now_ns(executor_ptr self) {
  return self->clock().now().time_since_epoch().count();
}

void hand_out(executor_ptr self, const executor_actions& actions) {
  auto& st = self->state;
  for (auto& g : actions.grants) {
    if (g.phase == phase_kind::rollout || g.phase == phase_kind::training)
      spdlog::debug("event=run_permit group={} job={} phase={} gpus={} switch_s={:.2f} cold={}",
                    st.config.group, g.job, g.phase, g.gpus, g.switch_s, g.cold);
    if (st.worker)
      self->send(st.worker, run_atom::value, g);
  }
  for (auto& r : actions.resizes)
    if (st.worker)
      self->send(st.worker, resize_atom::value, r.job, r.gpus);
}

/// What the job's phases cost after another job's on the group's GPUs (WEAVE §3 C3).
phase_switches switches_of(const group_executor_config& c, const rl_job& job) {
  const int rollout_per_node = std::min(job.rollout_gpus, c.gpus_per_rollout_node);
  const int training_per_node = std::min(c.training_gpus, c.gpus_per_training_node);
  return {phase_switch_costs(job.rollout_memory_gb, rollout_per_node, c.policy),
          phase_switch_costs(training_memory_per_node(job, c.training_gpus), training_per_node,
                             c.policy)};
}

/// The job ran its last iteration: it leaves the schedule now, before its next rollout is
/// permitted, and the scheduler hears it finished.
void complete(executor_ptr self, const std::string& job, executor_actions& actions) {
  auto& st = self->state;
  std::erase_if(actions.grants, [&](auto& g) { return g.job == job; });
  std::erase_if(actions.resizes, [&](auto& r) { return r.job == job; });
  auto freed = st.schedule->remove(job);
  actions.grants.insert(actions.grants.end(), freed.grants.begin(), freed.grants.end());
  actions.resizes.insert(actions.resizes.end(), freed.resizes.begin(), freed.resizes.end());
  if (st.worker)
    self->send(st.worker, leave_atom::value, job);
  spdlog::info("event=job_completed group={} job={}", st.config.group, job);
  self->request(st.scheduler, caf::infinite, finish_atom::value, job)
    .then([](ok_atom) {}, [](const caf::error&) {});
}

void report_drift(executor_ptr self) {
  auto& st = self->state;
  auto drift = st.ledger->drift_victim();
  if (!drift)
    return;
  spdlog::info("event=job_drifted group={} job={} rollout_s={:.1f} training_s={:.1f}",
               st.config.group, drift->job, drift->rollout_s, drift->training_s);
  self->send(st.scheduler, drift_atom::value, drift->job, drift->rollout_s, drift->training_s,
             drift->iterations_done);
}

void phase_done(executor_ptr self, const std::string& job, phase_kind phase, double solo_s) {
  auto& st = self->state;
  if (!st.ledger->find(job) || st.schedule->current_phase(job) != phase)
    return; // a report from before the job left or re-joined
  auto end = st.ledger->phase_done(job, phase, solo_s, now_ns(self));
  auto actions = st.schedule->phase_done(job, phase);
  if (end) {
    if (st.observer)
      self->send(st.observer, iteration_atom::value, end->record);
    if (end->completed)
      complete(self, job, actions);
    else
      report_drift(self);
  }
  hand_out(self, actions);
}

} // namespace

group_executor_actor::behavior_type
group_executor(group_executor_actor::stateful_pointer<group_executor_state> self,
               group_executor_config config, worker_actor worker,
               cluster_scheduler_actor scheduler, observer_actor observer) {
  auto& st = self->state;
  st.config = std::move(config);
  st.schedule = std::make_unique<round_robin>(st.config.gpus_per_rollout_node,
                                              st.config.training_gpus,
                                              st.config.policy.tail_migration_threshold,
                                              st.config.migrate_tails);
  st.ledger.emplace(st.config.group, st.config.training_gpus);
  st.worker = std::move(worker);
  st.scheduler = std::move(scheduler);
  st.observer = std::move(observer);
  return {
    [self](join_atom, const group_member& m) {
      auto& st = self->state;
      // WEAVE §5.1: the one-time Init stages the job's state into host DRAM while the GPUs
      // serve the group's other jobs; every run permit after that is a warm start.
      auto sw = switches_of(st.config, m.job);
      const double staging = std::max(sw.rollout.cold_s, sw.training.cold_s);
      st.ledger->join(m, now_ns(self));
      spdlog::info("event=job_joined group={} job={} members={} staging_s={:.1f}",
                   st.config.group, m.job.id, st.ledger->size(), staging);
      self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(
                                 std::chrono::duration<double>(staging)),
                         staged_atom::value, m.job.id);
    },
    [self](staged_atom, const std::string& job) {
      auto& st = self->state;
      auto* m = st.ledger->find(job);
      if (!m || st.schedule->contains(job))
        return; // left while staging
      hand_out(self, st.schedule->add(m->member, switches_of(st.config, m->member.job), true));
    },
    [self](leave_atom, const std::string& job) {
      auto& st = self->state;
      if (!st.ledger->leave(job))
        return;
      if (st.worker)
        self->send(st.worker, leave_atom::value, job);
      hand_out(self, st.schedule->remove(job));
      spdlog::info("event=job_left group={} job={} members={}", st.config.group, job,
                   st.ledger->size());
    },
    [self](done_atom, const std::string& job, phase_kind phase, double solo_s) {
      phase_done(self, job, phase, solo_s);
    },
    [self](tail_atom, const std::string& job) {
      auto& st = self->state;
      if (st.ledger->find(job))
        hand_out(self, st.schedule->tail_bound(job));
    },
  };
}

} // namespace loom
