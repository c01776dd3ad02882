#include "scheduler/group_executor.hpp"

#include <limits>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/codecs.hpp"
#include "scheduler/placement.hpp"
#include "store/persist.hpp"

namespace loom {

namespace {

using executor_ptr = group_executor_actor::stateful_pointer<group_executor_state>;

int64_t now_ns(executor_ptr self) {
  return self->clock().now().time_since_epoch().count();
}

phase_switches switches_of(const group_executor_config& c, const rl_job& job) {
  return member_switches(job, c.gpus_per_rollout_node, c.gpus_per_training_node, c.training_gpus,
                         c.policy);
}

/// Sets the alarm for the earliest due watched phase, unless one rings by then.
void arm(executor_ptr self) {
  auto& st = self->state;
  if (st.watched.empty())
    return;
  int64_t due = std::numeric_limits<int64_t>::max();
  for (auto& [job, w] : st.watched)
    due = std::min(due, w.due_ns());
  if (st.alarm_ns != 0 && st.alarm_ns <= due)
    return;
  st.alarm_ns = due;
  self->delayed_send(self, std::chrono::nanoseconds{std::max<int64_t>(0, due - now_ns(self))},
                     overrun_atom::value, due);
}

/// WEAVE §5.3 stragglers: the permitted phase is checked at its overrun deadline.
void watch(executor_ptr self, const phase_grant& g) {
  auto& st = self->state;
  auto* m = st.ledger->find(g.job);
  if (!m || m->member.job.profile) // a profiling pass has no worst case to overrun yet
    return;
  st.watched[g.job] = watched_phase{
    g.phase, now_ns(self),
    deadlines_of(m->member.job, g, st.config.training_gpus, st.config.policy)};
  arm(self);
}

void hand_out(executor_ptr self, const executor_actions& actions) {
  auto& st = self->state;
  for (auto g : actions.grants) {
    spdlog::debug("event=run_permit group={} job={} phase={} gpus={} switch_s={:.2f} cold={}",
                  st.config.group, g.job, g.phase, g.gpus, g.switch_s, g.cold);
    if (auto* m = st.ledger->find(g.job)) {
      g.iteration = m->iteration + 1;
      g.profiling = m->member.job.profile;
    }
    g.group = st.config.group;
    watch(self, g);
    if (st.worker)
      self->send(st.worker, run_atom::value, g);
  }
  for (auto& r : actions.resizes)
    if (st.worker)
      self->send(st.worker, resize_atom::value, r);
}

/// The job's place in the turn order and its iteration count, durable and kept by the
/// scheduler, then `then`. A failed write runs `fail` (what it would acknowledge is not
/// durable), and so does a job that left meanwhile: its departure wrote the count the scheduler
/// held then, without this one.
template <class Then, class Fail>
void save_progress(executor_ptr self, const std::string& job, Then then, Fail fail) {
  auto& st = self->state;
  auto place = st.schedule->place_of(job);
  auto* m = st.ledger->find(job);
  if (!place || !m || !st.store) {
    then();
    return;
  }
  job_progress p{job, st.config.group, place->position, place->round, m->iteration};
  write_batch batch;
  batch.sync = st.config.sync_writes;
  batch.records.push_back({record_kind::progress, job, encode_progress(p), false});
  persist(
    self, st.store, std::move(batch), std::vector<loom_event>{},
    [self, p, then, fail]() mutable {
      if (!self->state.scheduler) {
        then();
        return;
      }
      self->request(self->state.scheduler, caf::infinite, progress_atom::value, p)
        .then([then](ok_atom) mutable { then(); },
              [fail](caf::error& err) mutable { fail(std::move(err)); });
    },
    [self, job, fail](caf::error err) mutable {
      spdlog::error("event=progress_unstored group={} job={} error=\"{}\"",
                    self->state.config.group, job, render(err));
      fail(std::move(err));
    });
}

/// Answers a release that waited for its progress write, unless the group ended meanwhile
/// (its state's destructor answered it then).
template <class Answer>
void answer_release(executor_ptr self, uint64_t id, Answer&& answer) {
  auto it = self->state.releases.find(id);
  if (it == self->state.releases.end())
    return;
  it->second.deliver(std::forward<Answer>(answer));
  self->state.releases.erase(it);
}

/// The job ran its last iteration (`done` in this placement): it leaves the schedule now,
/// before its next rollout is permitted, and the scheduler hears it finished.
void complete(executor_ptr self, const std::string& job, int64_t done,
              executor_actions& actions) {
  auto& st = self->state;
  std::erase_if(actions.grants, [&](auto& g) { return g.job == job; });
  std::erase_if(actions.resizes, [&](auto& r) { return r.job == job; });
  // The last iteration's count reaches the scheduler before the finish (one sender: in order),
  // and the job's record keeps it with its departure.
  if (auto place = st.schedule->place_of(job); place && st.scheduler)
    self->request(st.scheduler, caf::infinite, progress_atom::value,
                  job_progress{job, st.config.group, place->position, place->round, done})
      .then([](ok_atom) {}, [](const caf::error&) {});
  auto freed = st.schedule->remove(job);
  st.watched.erase(job);
  actions.grants.insert(actions.grants.end(), freed.grants.begin(), freed.grants.end());
  actions.resizes.insert(actions.resizes.end(), freed.resizes.begin(), freed.resizes.end());
  if (st.worker)
    self->send(st.worker, leave_atom::value, job, job_state::finished);
  spdlog::info("event=job_completed group={} job={}", st.config.group, job);
  self->request(st.scheduler, caf::infinite, finish_atom::value, job)
    .then([](ok_atom) {}, [](const caf::error&) {});
}

/// The job's profiling pass ended (WEAVE §5 (1)(2)): it leaves the schedule before another
/// phase is permitted, its workers hear it is being placed again, and the scheduler places it
/// with what it measured.
void profiled(executor_ptr self, const job_profile& p, executor_actions& actions) {
  auto& st = self->state;
  std::erase_if(actions.grants, [&](auto& g) { return g.job == p.job; });
  std::erase_if(actions.resizes, [&](auto& r) { return r.job == p.job; });
  auto freed = st.schedule->remove(p.job);
  actions.grants.insert(actions.grants.end(), freed.grants.begin(), freed.grants.end());
  actions.resizes.insert(actions.resizes.end(), freed.resizes.begin(), freed.resizes.end());
  if (st.worker)
    self->send(st.worker, leave_atom::value, p.job, job_state::profiled);
  spdlog::info("event=profile_measured group={} job={} rollout_s={:.3f} training_s={:.3f} "
               "rollout_memory_gb={:.4f} training_memory_gb={:.4f}",
               st.config.group, p.job, p.rollout_s, p.training_s, p.rollout_memory_gb,
               p.training_memory_gb);
  self->send(st.scheduler, profiled_atom::value, p);
}

void report_drift(executor_ptr self) {
  auto& st = self->state;
  auto drift = st.ledger->drift_victim(st.config.policy.drift_margin);
  if (!drift)
    return;
  spdlog::info("event=job_drifted group={} job={} rollout_s={:.1f} training_s={:.1f}",
               st.config.group, drift->job, drift->rollout_s, drift->training_s);
  self->send(st.scheduler, drift_atom::value, drift->job, drift->rollout_s, drift->training_s,
             drift->iterations_done);
}

/// The workers of a joined (or restored) job have its state staged: it takes its turns.
void staged(executor_ptr self, const std::string& job) {
  auto& st = self->state;
  auto* m = st.ledger->find(job);
  if (!m || st.schedule->contains(job))
    return;
  std::optional<turn_place> at;
  if (auto it = st.restored.find(job); it != st.restored.end()) {
    at = it->second;
    st.restored.erase(it);
  }
  auto actions = st.schedule->add(m->member, switches_of(st.config, m->member.job), true, at);
  auto place = st.schedule->place_of(job);
  save_progress(
    self, job,
    [group = st.config.group, job, where = *place, done = m->iteration] {
      spdlog::info("event=job_staged group={} job={} position={} round={} iterations_done={}",
                   group, job, where.position, where.round, done);
    },
    [](const caf::error&) {}); // logged; the progress is written again at its next phase
  hand_out(self, actions);
}

caf::result<ok_atom> phase_done(executor_ptr self, const std::string& job, phase_kind phase,
                                double solo_s) {
  auto& st = self->state;
  if (!st.ledger->find(job))
    return make_error(errc::job_ended,
                      fmt::format("job '{}' is no longer in group {}", job, st.config.group));
  if (st.schedule->current_phase(job) != phase || !st.schedule->running(job))
    return make_error(errc::out_of_turn,
                      fmt::format("job '{}' is not running its {} phase; run its iteration again "
                                  "from its rollout",
                                  job, phase));
  st.watched.erase(job);
  auto end = st.ledger->phase_done(job, phase, solo_s, now_ns(self));
  auto actions = st.schedule->phase_done(job, phase);
  if (end && end->profiled)
    profiled(self, *end->profiled, actions);
  if (!end || end->profiled) {
    hand_out(self, actions);
    return ok_atom::value;
  }
  if (st.observer)
    self->send(st.observer, iteration_atom::value, end->record);
  if (end->completed) {
    complete(self, job, end->record.index + 1, actions);
    hand_out(self, actions);
    return ok_atom::value;
  }
  report_drift(self);
  hand_out(self, actions);
  const auto id = st.next_release++;
  auto rp = st.releases.emplace(id, self->make_response_promise<ok_atom>()).first->second;
  save_progress(
    self, job, [self, id] { answer_release(self, id, ok_atom::value); },
    [self, id](caf::error err) { answer_release(self, id, std::move(err)); });
  return rp;
}

/// The watched phase's deadline passed: reported once past the overrun factor (its elapsed
/// time feeds the drift check), failed alone past the stuck factor (WEAVE §5.3).
void deadline_passed(executor_ptr self, const std::string& job) {
  auto& st = self->state;
  auto it = st.watched.find(job);
  if (it == st.watched.end())
    return;
  auto& w = it->second;
  const double elapsed = double(now_ns(self) - w.since_ns) / 1e9;
  if (!w.overran) {
    w.overran = true;
    st.ledger->overran(job, w.phase, elapsed);
    spdlog::warn("event=phase_overrun group={} job={} phase={} elapsed_s={:.1f} limit_s={:.1f}",
                 st.config.group, job, w.phase, elapsed, w.deadlines.overrun_s);
    if (st.observer)
      self->send(st.observer, overrun_atom::value, job, w.phase, elapsed);
    report_drift(self);
    return;
  }
  auto reason = fmt::format("its {} phase ran {:.0f} s, past {} times its worst case", w.phase,
                            elapsed, st.config.policy.stuck_factor);
  spdlog::error("event=phase_stuck group={} job={} phase={} elapsed_s={:.1f}", st.config.group,
                job, w.phase, elapsed);
  st.watched.erase(it);
  self->request(st.scheduler, caf::infinite, fail_atom::value, job, reason)
    .then([](ok_atom) {}, [](const caf::error&) {});
}

/// The alarm rang: every watched phase due by now is checked, and the next alarm set.
void alarm_rang(executor_ptr self, int64_t at_ns) {
  auto& st = self->state;
  if (at_ns != st.alarm_ns)
    return; // superseded by an earlier alarm
  st.alarm_ns = 0;
  std::vector<std::string> due;
  for (auto& [job, w] : st.watched)
    if (w.due_ns() <= now_ns(self))
      due.push_back(job);
  for (auto& job : due)
    deadline_passed(self, job);
  arm(self);
}

member_status status_of(executor_ptr self, const std::string& job) {
  auto& st = self->state;
  auto* m = st.ledger->find(job);
  member_status s{job};
  if (!m)
    return s;
  s.iterations_done = m->iteration;
  s.overruns = m->overruns;
  s.staged = st.schedule->contains(job);
  if (!s.staged) {
    s.waiting = "its workers have not said its state is staged (their first PhaseAcquire or "
                "Staged does)";
    return s;
  }
  s.phase = *st.schedule->current_phase(job);
  s.running = st.schedule->running(job);
  s.waiting = st.schedule->wait_reason(job);
  return s;
}

void joined(executor_ptr self, const group_member& m, std::optional<job_progress> progress) {
  auto& st = self->state;
  st.ledger->join(m, now_ns(self), progress ? progress->iterations_done : 0);
  double staging = 0;
  if (progress) {
    st.restored[m.job.id] = {progress->position, progress->round};
  } else {
    // WEAVE §5.1: the one-time Init stages the job's state into host DRAM while the GPUs serve
    // the group's other jobs; its workers say when it is done.
    staging = staging_s(switches_of(st.config, m.job));
  }
  spdlog::info("event=job_joined group={} job={} members={} restored={} iterations_done={} "
               "expected_staging_s={:.1f}",
               st.config.group, m.job.id, st.ledger->size(), progress.has_value(),
               progress ? progress->iterations_done : 0, staging);
  if (st.worker)
    self->send(st.worker, join_atom::value, member_joined{m.job.id, st.config.group, staging});
}

void left(executor_ptr self, const std::string& job, job_state why) {
  auto& st = self->state;
  if (!st.ledger->leave(job))
    return;
  st.restored.erase(job);
  st.watched.erase(job);
  if (st.worker)
    self->send(st.worker, leave_atom::value, job, why);
  hand_out(self, st.schedule->remove(job));
  spdlog::info("event=job_left group={} job={} state={} members={}", st.config.group, job, why,
               st.ledger->size());
}

/// Every device of the group's training pool: a training grant runs on all of them.
std::vector<node_devices> training_devices(const group_executor_config& c) {
  std::vector<node_devices> out;
  int left = c.training_gpus;
  for (auto& name : c.training_node_names) {
    node_devices n{name, {}};
    for (int d = 0; d < c.gpus_per_training_node && left > 0; ++d, --left)
      n.devices.push_back(d);
    out.push_back(std::move(n));
  }
  return out;
}

} // namespace

group_executor_state::~group_executor_state() {
  for (auto& [id, rp] : releases)
    rp.deliver(make_error(errc::job_ended,
                          fmt::format("group {} ended before the release's progress was stored; "
                                      "ask where the job stands",
                                      config.group)));
}

group_executor_actor::behavior_type
group_executor(group_executor_actor::stateful_pointer<group_executor_state> self,
               group_executor_config config, worker_actor worker,
               cluster_scheduler_actor scheduler, observer_actor observer, store_actor store) {
  auto& st = self->state;
  st.config = std::move(config);
  st.schedule = std::make_unique<round_robin>(st.config.gpus_per_rollout_node,
                                              st.config.training_gpus,
                                              st.config.policy.tail_migration_threshold,
                                              st.config.migrate_tails);
  st.schedule->name_nodes(st.config.rollout_node_names, training_devices(st.config));
  st.ledger.emplace(st.config.group, st.config.training_gpus);
  st.worker = std::move(worker);
  st.scheduler = std::move(scheduler);
  st.observer = std::move(observer);
  st.store = std::move(store);
  return {
    [self](join_atom, const group_member& m) { joined(self, m, std::nullopt); },
    [self](restore_atom, const group_member& m, const job_progress& p) { joined(self, m, p); },
    [self](leave_atom, const std::string& job, job_state why) { left(self, job, why); },
    [self](staged_atom, const std::string& job) { staged(self, job); },
    [self](done_atom, const std::string& job, phase_kind phase, double solo_s) {
      return phase_done(self, job, phase, solo_s);
    },
    [self](footprint_atom, const std::string& job, phase_kind phase, double gb) {
      self->state.ledger->footprint(job, phase, gb);
    },
    [self](tail_atom, const std::string& job) {
      auto& st = self->state;
      if (st.ledger->find(job))
        hand_out(self, st.schedule->tail_bound(job));
    },
    [self](status_atom, const std::string& job) { return status_of(self, job); },
    [self](overrun_atom, int64_t at_ns) { alarm_rang(self, at_ns); },
  };
}

} // namespace loom
