#include "replay/sim_frameworks.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <cmath>

#include "protocol/inspect.hpp"
#include "scheduler/phase_costs.hpp"

namespace loom::replay {

namespace {

using sim_ptr = simulated_frameworks_actor::stateful_pointer<sim_frameworks_state>;
using job_run = sim_frameworks_state::job_run;

/// Simulated time: the actor clock's, times the time scale (1 in replay; `loom drive` runs
/// the frameworks in real time, compressed).
caf::timespan now(sim_ptr self) {
  auto t = self->clock().now().time_since_epoch();
  if (self->state.time_scale == 1.0)
    return t;
  return caf::timespan{int64_t(double(t.count()) * self->state.time_scale)};
}

double seconds(caf::timespan t) {
  return std::chrono::duration<double>(t).count();
}

/// The actor-clock wait for `s` simulated seconds.
caf::timespan span(sim_ptr self, double s) {
  return caf::timespan{int64_t(std::llround(std::max(0.0, s) / self->state.time_scale * 1e9))};
}

const job_arrival& spec_of(sim_ptr self, const job_run& r) {
  return self->state.jobs[r.index];
}

/// WEAVE §5.2 sync of the job's weights to its rollout nodes.
double sync_seconds(sim_ptr self, rl_job job) {
  derive_phase_costs(job, self->state.config.cluster, self->state.config.policy.weave);
  return job.sync_s;
}

double rollout_rate(const job_run& r) {
  if (r.shrunk)
    return 1.0; // the tail keeps its per-GPU batch on the GPUs it was consolidated onto
  return r.need > 0 ? double(r.held) / r.need : 0.0;
}

/// Brings a running rollout's progress and the GPU ledger up to now.
void advance(sim_ptr self, job_run& r) {
  auto t = now(self);
  double dt = seconds(t - r.last);
  r.last = t;
  if (r.phase != phase_kind::rollout)
    return;
  self->state.ledger->rollout_busy_gpu_s += r.held * dt;
  double paused = std::min(r.pause_s, dt);
  r.pause_s -= paused;
  r.progress = std::min(r.draw.rollout_s, r.progress + (dt - paused) * rollout_rate(r));
}

/// Plans the next wake of a running rollout: the tail report, then the end.
void plan_rollout(sim_ptr self, const std::string& job, job_run& r) {
  ++r.version;
  const double rate = rollout_rate(r);
  if (rate <= 0)
    return; // waits for GPUs
  const double target =
    !r.tail_reported && r.draw.tail_s < r.draw.rollout_s ? r.draw.tail_s : r.draw.rollout_s;
  double delay = r.pause_s + std::max(0.0, target - r.progress) / rate;
  self->delayed_send(self, span(self, delay), wake_atom::value, job, r.version);
}

activity_kind activity_of(phase_kind p) {
  switch (p) {
    case phase_kind::rollout: return activity_kind::rollout;
    case phase_kind::training: return activity_kind::training;
    case phase_kind::sync: return activity_kind::sync;
  }
  return activity_kind::rollout;
}

/// Appends what the job does from now for `duration_s` (< 0: until closed); its index.
size_t record(sim_ptr self, const std::string& job, const std::string& group, activity_kind kind,
              double duration_s, int gpus = 0) {
  auto& acts = self->state.ledger->activities;
  const double t = seconds(now(self));
  acts.push_back({job, group, kind, t, duration_s < 0 ? -1.0 : t + duration_s, gpus});
  return acts.size() - 1;
}

/// The running phase ends now (reported done, left or crashed).
void close_activity(sim_ptr self, const job_run& r) {
  auto& acts = self->state.ledger->activities;
  if (r.activity < acts.size() && acts[r.activity].end_s < 0)
    acts[r.activity].end_s = seconds(now(self));
}

void submit(sim_ptr self, const std::string& job) {
  auto& st = self->state;
  auto& r = st.runs.at(job);
  rl_job spec = spec_of(self, r).job;
  spec.iterations = std::max<int64_t>(1, spec.iterations - r.done);
  if (spec.profile) // WEAVE §5 (1)(2): Loom learns these from the profiling pass
    spec.rollout_s = spec.training_s = spec.rollout_memory_gb = spec.training_memory_gb = 0;
  ++st.ledger->submissions;
  self->request(st.scheduler, caf::infinite, submit_atom::value, spec)
    .then(
      [self, job](const placement_reply& reply) {
        if (reply.kind == placement_kind::rejected) {
          self->state.ledger->rejected.push_back(job + ": " + reply.reason);
          return;
        }
        self->state.runs.at(job).active = true;
      },
      [self, job](const caf::error& err) {
        self->state.ledger->rejected.push_back(job + ": " + self->system().render(err));
      });
}

/// The job stops whatever it runs (left its group, crashed).
void stop(sim_ptr self, job_run& r) {
  advance(self, r);
  close_activity(self, r);
  ++r.version;
  r.held = 0;
  r.active = false;
}

/// Its checkpoint survives (WEAVE §5.3): the crashed job is resubmitted as a new arrival.
void crash(sim_ptr self, uint64_t index) {
  auto& st = self->state;
  auto& a = st.jobs[index];
  auto& r = st.runs.at(a.job.id);
  if (!r.active)
    return; // finished (or never placed) before its crash was due
  stop(self, r);
  record(self, a.job.id, r.group, activity_kind::crash, 0);
  ++st.ledger->crashes;
  spdlog::debug("event=sim_job_crashed job={} done={}", a.job.id, r.done);
  self->request(st.scheduler, caf::infinite, fail_atom::value, a.job.id,
                std::string{"simulated crash"})
    .then([](ok_atom) {}, [](const caf::error&) {});
  self->delayed_send(self, span(self, a.recovery_s), arrive_atom::value, index);
}

/// A rollout permit: this iteration's realized lengths are drawn, the rollout starts.
void start_rollout(sim_ptr self, const phase_grant& g, job_run& r) {
  auto& st = self->state;
  const auto& a = spec_of(self, r);
  const double progress = a.job.iterations > 0 ? double(r.done) / double(a.job.iterations) : 0.0;
  // The profiling pass generates to the maximum response length: the worst case, no tail.
  r.draw = g.profiling ? realized_iteration{a.job.rollout_s, a.job.rollout_s, a.job.training_s}
                       : realize(a.job.rollout_s, a.job.training_s,
                                 st.draws->get(r.index, uint64_t(r.done)), a.drift, progress);
  r.progress = 0;
  r.pause_s = g.switch_s;
  r.need = a.job.rollout_gpus;
  r.held = g.gpus;
  r.tail_reported = false;
  r.shrunk = false;
  plan_rollout(self, g.job, r);
}

/// A run permit from the job's executor, which its reports go back to.
void permitted(sim_ptr self, const phase_grant& g) {
  auto it = self->state.runs.find(g.job);
  if (it == self->state.runs.end())
    return;
  auto& r = it->second;
  const auto& a = spec_of(self, r);
  r.executor = caf::actor_cast<group_executor_actor>(self->current_sender());
  r.active = true;
  advance(self, r);
  r.phase = g.phase;
  r.profiling = g.profiling;
  r.last = now(self);
  r.group = g.group;
  close_activity(self, r);
  r.activity = record(self, g.job, g.group, activity_of(g.phase), -1, g.gpus);
  const double t = seconds(r.last);
  if (g.phase == phase_kind::rollout) {
    start_rollout(self, g, r);
    return;
  }
  if (g.phase == phase_kind::training)
    r.phase_end_s = t + g.switch_s + r.draw.training_s * a.job.training_gpus / std::max(1, g.gpus);
  else
    r.phase_end_s = t + sync_seconds(self, a.job);
  ++r.version;
  self->delayed_send(self, span(self, r.phase_end_s - t), wake_atom::value, g.job, r.version);
}

/// The running rollout's GPUs change; a shrink at the tail pays the migration pause.
void resized(sim_ptr self, const std::string& job, int gpus) {
  auto it = self->state.runs.find(job);
  if (it == self->state.runs.end() || it->second.phase != phase_kind::rollout)
    return;
  auto& r = it->second;
  advance(self, r);
  if (gpus < r.held && r.tail_reported && !r.shrunk) {
    r.shrunk = true;
    r.pause_s += self->state.config.policy.weave.tail_migration_cost_s;
    record(self, job, r.group, activity_kind::tail_migration, 0, gpus);
  }
  r.held = gpus;
  plan_rollout(self, job, r);
}

/// The job joined a group: its Init (WEAVE §5.1: control plane and state into host DRAM) takes
/// the cold start the executor expects, then the framework says its state is staged.
void joined(sim_ptr self, const member_joined& j) {
  auto it = self->state.runs.find(j.job);
  if (it == self->state.runs.end())
    return;
  auto& r = it->second;
  r.executor = caf::actor_cast<group_executor_actor>(self->current_sender());
  r.group = j.group;
  record(self, j.job, j.group, activity_kind::staging, j.staging_s);
  self->delayed_send(self, span(self, j.staging_s), staged_atom::value, j.job, ++r.joins);
}

/// A phase's end, reported to the executor (which answers once it is durable); in the profiling
/// pass with the host memory its state holds, as a framework's workers measure it.
void report_done(sim_ptr self, const job_run& r, const std::string& job, phase_kind phase,
                 double solo_s) {
  close_activity(self, r);
  const auto& spec = spec_of(self, r).job;
  if (r.profiling && phase != phase_kind::sync)
    self->send(r.executor, footprint_atom::value, job, phase,
               phase == phase_kind::rollout ? spec.rollout_memory_gb : spec.training_memory_gb);
  self->request(r.executor, caf::infinite, done_atom::value, job, phase, solo_s)
    .then([](ok_atom) {}, [](const caf::error&) {});
}

/// A phase event is due: the rollout's tail threshold or end, or a training or sync end.
void woken(sim_ptr self, const std::string& job, uint64_t version) {
  auto& st = self->state;
  auto& r = st.runs.at(job);
  if (version != r.version || !r.active)
    return;
  advance(self, r);
  if (r.phase == phase_kind::rollout) {
    if (r.progress + 1e-9 < r.draw.rollout_s) {
      r.tail_reported = true; // the tail threshold: report it and go on to the end
      self->send(r.executor, tail_atom::value, job);
      plan_rollout(self, job, r);
      return;
    }
    ++r.version;
    r.held = 0;
    report_done(self, r, job, phase_kind::rollout, r.draw.rollout_s);
    return;
  }
  const auto& a = spec_of(self, r);
  if (r.phase == phase_kind::training) {
    // The same work on however many GPUs the group trains with.
    st.ledger->training_busy_gpu_s += r.draw.training_s * a.job.training_gpus;
    report_done(self, r, job, phase_kind::training, r.draw.training_s);
    return;
  }
  if (!r.profiling) // the profiling pass is not an iteration
    ++r.done;
  report_done(self, r, job, phase_kind::sync, sync_seconds(self, a.job));
}

} // namespace

simulated_frameworks_actor::behavior_type
sim_frameworks(simulated_frameworks_actor::stateful_pointer<sim_frameworks_state> self,
               loom::config config, std::vector<job_arrival> jobs,
               std::shared_ptr<length_draws> draws, std::shared_ptr<sim_ledger> ledger,
               double time_scale) {
  auto& st = self->state;
  st.time_scale = time_scale;
  st.config = std::move(config);
  st.jobs = std::move(jobs);
  st.draws = std::move(draws);
  st.ledger = std::move(ledger);
  for (size_t i = 0; i < st.jobs.size(); ++i) {
    auto& a = st.jobs[i];
    st.runs[a.job.id].index = i;
    self->delayed_send(self, span(self, a.arrival_s), arrive_atom::value, uint64_t(i));
    if (a.fail_after_s >= 0)
      self->delayed_send(self, span(self, a.arrival_s + a.fail_after_s), crash_atom::value,
                         uint64_t(i));
  }
  return {
    [self](connect_atom, cluster_scheduler_actor scheduler) {
      self->state.scheduler = std::move(scheduler);
    },
    [self](arrive_atom, uint64_t index) { submit(self, self->state.jobs[index].job.id); },
    [self](crash_atom, uint64_t index) { crash(self, index); },
    [self](join_atom, const member_joined& j) { joined(self, j); },
    [self](staged_atom, const std::string& job, uint64_t join) {
      auto& r = self->state.runs.at(job);
      if (join == r.joins && r.executor)
        self->send(r.executor, staged_atom::value, job);
    },
    [self](run_atom, const phase_grant& g) { permitted(self, g); },
    [self](resize_atom, const gpu_resize& r) { resized(self, r.job, r.gpus); },
    [self](leave_atom, const std::string& job, job_state) {
      auto it = self->state.runs.find(job);
      if (it != self->state.runs.end()) {
        ++it->second.joins; // a pending staging report is stale
        stop(self, it->second);
      }
    },
    [self](wake_atom, const std::string& job, uint64_t version) { woken(self, job, version); },
  };
}

} // namespace loom::replay
