#include "scheduler/group_executor.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "scheduler/meta_iteration.hpp"
#include "scheduler/placement.hpp"

namespace loom {

namespace {

using executor_ptr = group_executor_actor::stateful_pointer<group_executor_state>;

caf::timespan now(executor_ptr self) {
  return self->clock().now().time_since_epoch();
}

double seconds(caf::timespan t) {
  return std::chrono::duration<double>(t).count();
}

void hand_out(executor_ptr self, const executor_actions& actions) {
  auto& st = self->state;
  for (auto& g : actions.grants) {
    if (g.phase == phase_kind::rollout || g.phase == phase_kind::training)
      spdlog::debug("event=run_permit group={} job={} phase={} gpus={} switch_s={:.2f} cold={}",
                    st.config.group, g.job, to_string(g.phase), g.gpus, g.switch_s, g.cold);
    if (st.worker)
      self->send(st.worker, run_atom::value, g);
  }
  for (auto& r : actions.resizes)
    if (st.worker)
      self->send(st.worker, resize_atom::value, r.job, r.gpus);
}

/// WEAVE §5.3: a job whose measured phases outgrew its profile so far that the group
/// saturates is stopped and re-placed; the job that drifted most is the one that goes.
void check_drift(executor_ptr self) {
  auto& st = self->state;
  std::vector<group_member> measured;
  const group_executor_state::member* worst = nullptr;
  double worst_ratio = 1.0;
  for (auto& [id, m] : st.members) {
    double roll = std::max(m.job.rollout_s, m.measured_rollout_s);
    double train = std::max(m.job.training_s, m.measured_training_s);
    double scale = double(m.job.training_gpus) / std::max(1, st.config.training_gpus);
    measured.push_back({m.rollout_nodes, roll, train * scale, m.job.sync_s});
    double ratio = (roll + train) / (m.job.rollout_s + m.job.training_s);
    if (ratio > worst_ratio && !m.drift_reported) {
      worst_ratio = ratio;
      worst = &m;
    }
  }
  if (!worst || !saturated(measured))
    return;
  auto& m = st.members.at(worst->job.id);
  m.drift_reported = true;
  spdlog::info("event=job_drifted group={} job={} rollout_s={:.1f} training_s={:.1f}",
               st.config.group, m.job.id, m.measured_rollout_s, m.measured_training_s);
  self->send(st.scheduler, drift_atom::value, m.job.id,
             std::max(m.job.rollout_s, m.measured_rollout_s),
             std::max(m.job.training_s, m.measured_training_s), m.iteration);
}

} // namespace

group_executor_actor::behavior_type
group_executor(group_executor_actor::stateful_pointer<group_executor_state> self,
               group_executor_config config, worker_actor worker,
               cluster_scheduler_actor scheduler, observer_actor observer) {
  auto& st = self->state;
  st.config = std::move(config);
  st.core = std::make_unique<round_robin>(st.config.gpus_per_rollout_node,
                                          st.config.training_gpus,
                                          st.config.policy.tail_migration_threshold,
                                          st.config.migrate_tails);
  st.worker = std::move(worker);
  st.scheduler = std::move(scheduler);
  st.observer = std::move(observer);
  return {
    [self](join_atom, const rl_job& job, const std::vector<int>& rollout_nodes) {
      auto& st = self->state;
      const auto& p = st.config.policy;
      const int per_node = std::min(job.rollout_gpus, st.config.gpus_per_rollout_node);
      executor_member m{job.id, rollout_nodes, job.rollout_gpus,
                        phase_switch_costs(job.rollout_memory_gb, per_node, p),
                        phase_switch_costs(training_memory_per_node(job, st.config.training_gpus),
                                           std::min(st.config.training_gpus,
                                                    st.config.gpus_per_training_node),
                                           p)};
      // WEAVE §5.1: the one-time Init stages the job's state into host DRAM while the GPUs
      // serve the group's other jobs; every run permit after that is a warm start.
      const double staging = std::max(m.rollout_switch.cold_s, m.training_switch.cold_s);
      st.members[job.id] = {job, rollout_nodes, now(self), 0, 0, 0, 0, false, std::move(m)};
      spdlog::info("event=job_joined group={} job={} members={} staging_s={:.1f}",
                   st.config.group, job.id, st.members.size(), staging);
      self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(
                                 std::chrono::duration<double>(staging)),
                         staged_atom::value, job.id);
    },
    [self](staged_atom, const std::string& job) {
      auto& st = self->state;
      auto it = st.members.find(job);
      if (it == st.members.end() || st.core->contains(job))
        return; // left while staging
      hand_out(self, st.core->add(it->second.schedule, true));
    },
    [self](leave_atom, const std::string& job) {
      auto& st = self->state;
      if (!st.members.erase(job))
        return;
      if (st.worker)
        self->send(st.worker, leave_atom::value, job);
      hand_out(self, st.core->remove(job));
      spdlog::info("event=job_left group={} job={} members={}", st.config.group, job,
                   st.members.size());
    },
    [self](done_atom, const std::string& job, phase_kind phase, double solo_s) {
      auto& st = self->state;
      auto it = st.members.find(job);
      if (it == st.members.end() || st.core->current_phase(job) != phase)
        return; // a report from before the job left or re-joined
      auto& m = it->second;
      m.solo_s += solo_s;
      if (phase == phase_kind::rollout)
        m.measured_rollout_s = solo_s;
      else if (phase == phase_kind::training)
        m.measured_training_s = solo_s;
      auto actions = st.core->phase_done(job, phase);
      if (phase == phase_kind::sync) {
        auto t = now(self);
        iteration_record rec{job,
                             st.config.group,
                             m.iteration,
                             t.count(),
                             seconds(t - m.since),
                             m.solo_s,
                             m.job.solo_s(),
                             m.job.slo};
        if (st.observer)
          self->send(st.observer, iteration_atom::value, std::move(rec));
        m.since = t;
        m.solo_s = 0;
        ++m.iteration;
        if (m.job.iterations > 0 && m.iteration >= m.job.iterations) {
          // Done: it leaves the schedule now, before its next rollout is permitted.
          std::erase_if(actions.grants, [&](auto& g) { return g.job == job; });
          std::erase_if(actions.resizes, [&](auto& r) { return r.job == job; });
          auto freed = st.core->remove(job);
          actions.grants.insert(actions.grants.end(), freed.grants.begin(), freed.grants.end());
          actions.resizes.insert(actions.resizes.end(), freed.resizes.begin(),
                                 freed.resizes.end());
          st.members.erase(it);
          if (st.worker)
            self->send(st.worker, leave_atom::value, job);
          spdlog::info("event=job_completed group={} job={}", st.config.group, job);
          self->request(st.scheduler, caf::infinite, finish_atom::value, job)
            .then([](ok_atom) {}, [](const caf::error&) {});
        } else {
          check_drift(self);
        }
      }
      hand_out(self, actions);
    },
    [self](tail_atom, const std::string& job) {
      auto& st = self->state;
      if (st.members.count(job))
        hand_out(self, st.core->tail_bound(job));
    },
  };
}

} // namespace loom
