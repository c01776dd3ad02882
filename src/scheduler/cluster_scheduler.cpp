#include "scheduler/cluster_scheduler.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "scheduler/group_executor.hpp"
#include "scheduler/phase_costs.hpp"
#include "scheduler/scheduler_steps.hpp"
#include "store/persist.hpp"

namespace loom {

namespace scheduler_steps {

std::string group_name(uint64_t id) {
  return fmt::format("g{}", id);
}

std::vector<std::string> node_names(const std::vector<pool_node>& pool,
                                    const std::vector<int>& nodes) {
  std::vector<std::string> out;
  for (int n : nodes)
    out.push_back(pool[size_t(n)].id);
  return out;
}

group_executor_actor executor_for(scheduler_ptr self, uint64_t id) {
  auto& st = self->state;
  if (auto it = st.executors.find(id); it != st.executors.end())
    return it->second;
  group_executor_config cfg{group_name(id),
                            gpus_per_node(st.engine->rollout_pool()),
                            gpus_per_node(st.engine->training_pool()),
                            st.engine->groups().at(id).training_gpus,
                            st.config.policy,
                            st.config.migrate_tails,
                            st.config.sync_writes,
                            st.rollout_node_names,
                            node_names(st.engine->training_pool(),
                                       st.engine->groups().at(id).training_nodes)};
  auto exec = self->spawn(group_executor, std::move(cfg), st.worker,
                          caf::actor_cast<cluster_scheduler_actor>(self), st.observer, st.store);
  st.executors.emplace(id, exec);
  if (auto d = st.dormant.find(id); d != st.dormant.end()) { // first, before the caller's word
    for (auto& m : d->second)
      if (m.progress)
        self->send(exec, restore_atom::value, m.member, *m.progress);
      else
        self->send(exec, join_atom::value, m.member);
    st.dormant.erase(d);
  }
  return exec;
}

record_write meta_write(const cluster_scheduler_state& st) {
  return {record_kind::meta, std::string{scheduler_meta_key},
          encode_scheduler_meta({st.engine->next_group_id(), st.failed_nodes}), false};
}

} // namespace scheduler_steps

namespace {

using namespace scheduler_steps;

/// The group as stored, or an erase when it has no jobs left.
record_write group_write(const placement_engine& engine, uint64_t id) {
  auto it = engine.groups().find(id);
  if (it == engine.groups().end())
    return record_write{record_kind::groups, group_name(id), {}, true};
  group_record g{group_name(id), {}, node_names(engine.rollout_pool(), it->second.rollout_nodes),
                 node_names(engine.training_pool(), it->second.training_nodes)};
  for (auto& m : it->second.members)
    g.jobs.push_back(m.job.id);
  return record_write{record_kind::groups, g.id, encode_group(g), false};
}

record_write placement_write(const placement_engine& engine, const rl_job& job, uint64_t id,
                             const std::vector<int>& rollout_nodes) {
  placement_record p{job.id, group_name(id), {}, {}};
  int left = job.rollout_gpus;
  for (int n : rollout_nodes) {
    auto& node = engine.rollout_pool()[size_t(n)];
    p.rollout.push_back({node.id, std::min(left, node.gpus)});
    left -= node.gpus;
  }
  for (int n : engine.groups().at(id).training_nodes) {
    auto& node = engine.training_pool()[size_t(n)];
    p.training.push_back({node.id, node.gpus});
  }
  return record_write{record_kind::placements, job.id, encode_placement(p), false};
}

int64_t now_ns(scheduler_ptr self) {
  return self->clock().now().time_since_epoch().count();
}

void observe(scheduler_ptr self, cluster_event event, const std::string& job, double decision_us) {
  auto& st = self->state;
  if (!st.observer)
    return;
  self->send(st.observer, cluster_atom::value,
             cluster_record{now_ns(self), event, job, st.engine->cost_per_hour(),
                            st.engine->gpus_in_use(true), st.engine->gpus_in_use(false),
                            decision_us});
}

/// What a decision writes: the job (and for a placement its placement, its group and the
/// group counter) and its event.
write_batch decision_batch(scheduler_ptr self, const rl_job& job, const placement_decision& d,
                           const placement_reply& reply, loom_event& event) {
  auto& st = self->state;
  write_batch batch;
  batch.sync = st.config.sync_writes;
  if (d.kind == placement_kind::rejected) {
    batch.records.push_back({record_kind::jobs, job.id,
                             encode_job({job, job_state::rejected, "", d.reason}), false});
    event = {event_kind::job_rejected, job.id, fmt::format("reason=\"{}\"", d.reason)};
    return batch;
  }
  batch.records.push_back(
    {record_kind::jobs, job.id, encode_job({job, job_state::placed, reply.group, ""}), false});
  batch.records.push_back(placement_write(*st.engine, job, d.group, d.rollout_nodes));
  batch.records.push_back(group_write(*st.engine, d.group));
  if (d.kind == placement_kind::new_group)
    batch.records.push_back(meta_write(st));
  event = {event_kind::job_placed, job.id,
           fmt::format("decision={} group={} delta_cost_per_hour={:.2f} cost_per_hour={:.2f}{}",
                       reply.kind, reply.group, d.delta_cost_per_hour, reply.cost_per_hour,
                       job.profile ? " profiling=true" : "")};
  return batch;
}

/// Everyone who asked for this submission hears the one answer.
void answer_all(scheduler_ptr self, const std::string& id, caf::expected<placement_reply> r) {
  auto waiting = std::move(self->state.admitting[id]);
  self->state.admitting.erase(id);
  for (auto& done : waiting)
    done(r);
}

placement_reply reply_of(const placement_engine& engine, const rl_job& job,
                         const placement_decision& d) {
  placement_reply reply{job.id, d.kind, {}, {}, {}, d.delta_cost_per_hour, 0, d.reason, 0};
  if (d.kind != placement_kind::rejected) {
    reply.group = group_name(d.group);
    reply.rollout_nodes = node_names(engine.rollout_pool(), d.rollout_nodes);
    reply.training_nodes = node_names(engine.training_pool(),
                                      engine.groups().at(d.group).training_nodes);
    reply.group_cost_per_hour = engine.group_cost_per_hour(d.group);
  }
  reply.cost_per_hour = engine.cost_per_hour();
  return reply;
}

/// The decision is durable: it takes effect and is answered.
void decided(scheduler_ptr self, const rl_job& job, const placement_decision& d,
             const placement_reply& reply, double decision_us) {
  auto& st = self->state;
  if (d.kind == placement_kind::rejected) {
    st.put_job(job.id, {job, job_state::rejected, 0, d.reason});
  } else {
    st.put_job(job.id, {job, job_state::placed, d.group, ""});
    self->send(executor_for(self, d.group), join_atom::value, group_member{job, d.rollout_nodes});
  }
  observe(self, event_of(d.kind), job.id, decision_us);
  answer_all(self, job.id, reply);
}

void decide(scheduler_ptr self, rl_job job) {
  auto& st = self->state;
  auto& engine = *st.engine;
  derive_phase_costs(job, st.config.cluster, st.config.policy);
  auto t0 = std::chrono::steady_clock::now();
  // A profiling pass runs alone whatever the policy (WEAVE §5 (1)); its measured figures then
  // go to the policy's chooser like any job's.
  auto d = st.config.choose && !job.profile ? st.config.choose(engine, job) : engine.place(job);
  double decision_us =
    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (d.kind != placement_kind::rejected)
    engine.commit(job, d);
  auto reply = reply_of(engine, job, d);
  loom_event event;
  auto batch = decision_batch(self, job, d, reply, event);
  persist(
    self, st.store, std::move(batch), std::move(event),
    [self, job, d, reply, decision_us] { decided(self, job, d, reply, decision_us); },
    [self, job, d](caf::error err) {
      // Not durable, so not decided: undo it and say why.
      if (d.kind != placement_kind::rejected)
        self->state.engine->remove(job.id);
      answer_all(self, job.id, std::move(err));
    });
}

event_kind departure_event(job_state state) {
  switch (state) {
    case job_state::finished: return event_kind::job_finished;
    case job_state::failed: return event_kind::job_failed;
    case job_state::drifted: return event_kind::job_drifted;
    case job_state::moved: return event_kind::job_moved;
    case job_state::profiled: return event_kind::job_profiled;
    default: return event_kind::job_cancelled;
  }
}

/// A job leaves a group whose executor was never spawned: the gateway hears it, as it would
/// from the executor.
void leave_dormant(scheduler_ptr self, const std::string& id, uint64_t group, job_state why) {
  auto& st = self->state;
  auto d = st.dormant.find(group);
  if (d == st.dormant.end())
    return;
  const auto n = std::erase_if(d->second, [&](auto& m) { return m.member.job.id == id; });
  if (d->second.empty() || !st.engine->groups().count(group))
    st.dormant.erase(d);
  if (n && st.worker)
    self->send(st.worker, leave_atom::value, id, why);
}

/// Tells the group's executor the job left; an emptied group's executor stops.
void leave_group(scheduler_ptr self, const std::string& id, uint64_t group, job_state why) {
  auto& st = self->state;
  auto ex = st.executors.find(group);
  if (ex == st.executors.end()) {
    leave_dormant(self, id, group, why);
    return;
  }
  self->send(ex->second, leave_atom::value, id, why);
  if (!st.engine->groups().count(group)) {
    self->send_exit(ex->second, caf::exit_reason::user_shutdown);
    st.executors.erase(ex);
  }
}

/// What a departure writes: the job's new state; its placement, progress and group go.
write_batch departure_batch(scheduler_ptr self, const job_entry& entry, uint64_t group) {
  auto& st = self->state;
  const auto& id = entry.job.id;
  write_batch batch;
  batch.sync = st.config.sync_writes;
  batch.records.push_back(
    {record_kind::jobs, id,
     encode_job({entry.job, entry.state, "", entry.reason, entry.iterations_done}), false});
  batch.records.push_back({record_kind::placements, id, {}, true});
  batch.records.push_back({record_kind::progress, id, {}, true});
  batch.records.push_back(group_write(*st.engine, group));
  return batch;
}

caf::result<ok_atom> depart_and_answer(scheduler_ptr self, const std::string& id,
                                       job_state state, const std::string& reason) {
  auto rp = self->make_response_promise<ok_atom>();
  depart(self, id, state, reason, [rp](caf::error err) mutable {
    if (err)
      rp.deliver(std::move(err));
    else
      rp.deliver(ok_atom::value);
  });
  return rp;
}

/// The job leaves its group (`why`) and Algorithm 1 places `job` again: it runs its
/// remaining iterations wherever that is. Rejected, its workers are told it ended.
void place_again(scheduler_ptr self, rl_job job, job_state why, const std::string& reason) {
  depart(self, job.id, why, reason, [self, job](caf::error err) {
    if (err)
      return;
    admit(self, job, [self, id = job.id](caf::expected<placement_reply> r) {
      if (r && r->kind != placement_kind::rejected)
        return;
      if (!r)
        spdlog::error("event=replacement_failed job={} error=\"{}\"", id, render(r.error()));
      // Its workers wait for a new group that will not come.
      if (self->state.worker)
        self->send(self->state.worker, leave_atom::value, id, job_state::rejected);
    });
  });
}

/// The placed job `id` as it stands, or nothing once it left.
const rl_job* placed_job(scheduler_ptr self, const std::string& id) {
  auto it = self->state.jobs.find(id);
  if (it == self->state.jobs.end() || it->second.state != job_state::placed)
    return nullptr;
  return &it->second.job;
}

/// WEAVE §5.3: the job's measured phases saturate its group; it is stopped and placed again
/// with them, for the iterations it has left. They are grown by the drift margin, the
/// hysteresis that makes the next re-placement wait for as large a change again.
void replace_drifted(scheduler_ptr self, const std::string& id, double rollout_s,
                     double training_s, int64_t done_iterations) {
  const rl_job* placed = placed_job(self, id);
  if (!placed)
    return;
  rl_job job = placed->continued(done_iterations);
  const double grown = 1 + self->state.config.policy.drift_margin;
  job.rollout_s = rollout_s * grown;
  job.training_s = training_s * grown;
  place_again(self, std::move(job), job_state::drifted, "measured phases saturate its group");
}

/// WEAVE §5 (1)(2): the job's solo profiling pass measured its phases at the maximum token
/// limit; those worst cases (grown by the drift margin, so that noise alone never reads as
/// drift) and the footprints its workers measured place it by Algorithm 1. A footprint no
/// worker reported stays as its spec gave it.
void place_profiled(scheduler_ptr self, const job_profile& p) {
  const rl_job* placed = placed_job(self, p.job);
  if (!placed || !placed->profile)
    return;
  rl_job job = *placed;
  job.profile = false;
  const double grown = 1 + self->state.config.policy.drift_margin;
  constexpr double shortest_s = 1e-3; // Algorithm 1 plans a rollout that takes time
  job.rollout_s = std::max(p.rollout_s * grown, shortest_s);
  job.training_s = std::max(p.training_s * grown, shortest_s);
  if (p.rollout_memory_gb > 0)
    job.rollout_memory_gb = p.rollout_memory_gb * grown;
  if (p.training_memory_gb > 0)
    job.training_memory_gb = p.training_memory_gb * grown;
  // The departure's record keeps what was measured: a restart before the new placement is
  // durable admits the job with it rather than profiling it again.
  self->state.jobs.at(p.job).job = job;
  place_again(self, std::move(job), job_state::profiled,
              fmt::format("profiled: rollout {:.3f} s, training {:.3f} s, host memory {:.4f} + "
                          "{:.4f} GB",
                          p.rollout_s, p.training_s, p.rollout_memory_gb, p.training_memory_gb));
}

caf::result<placement_reply> submit(scheduler_ptr self, rl_job job) {
  if (job.id.empty())
    return make_error(errc::invalid_argument, "a job needs a name");
  auto rp = self->make_response_promise<placement_reply>();
  admit(self, std::move(job), [rp](caf::expected<placement_reply> r) mutable {
    if (r)
      rp.deliver(std::move(*r));
    else
      rp.deliver(std::move(r.error()));
  });
  return rp;
}

} // namespace

void scheduler_steps::admit(scheduler_ptr self, rl_job job, placed_callback done) {
  auto& st = self->state;
  if (auto pending = st.admitting.find(job.id); pending != st.admitting.end()) {
    pending->second.push_back(std::move(done)); // the same submission again: the same answer
    return;
  }
  if (auto it = st.jobs.find(job.id); it != st.jobs.end() && it->second.state == job_state::placed) {
    done(make_error(errc::already_exists,
                    fmt::format("job '{}' is already placed in {}", job.id,
                                group_name(it->second.group))));
    return;
  }
  st.admitting[job.id].push_back(std::move(done));
  decide(self, std::move(job));
}

void scheduler_steps::depart(scheduler_ptr self, const std::string& id, job_state state,
                             const std::string& reason, std::function<void(caf::error)> done) {
  auto& st = self->state;
  auto it = st.jobs.find(id);
  if (it == st.jobs.end() || it->second.state != job_state::placed) {
    if (auto pending = st.admitting.find(id); pending != st.admitting.end()) {
      // Being placed (submitted, or placed again: moved, profiled, drifted): the departure
      // waits for that decision to be durable, then takes the job wherever it landed.
      pending->second.push_back([self, id, state, reason, done](const auto&) {
        depart(self, id, state, reason, done);
      });
      return;
    }
    done(it == st.jobs.end()
           ? make_error(errc::not_found, fmt::format("no job '{}'", id))
           : make_error(errc::job_ended, fmt::format("job '{}' is {}, not placed", id,
                                                     it->second.state)));
    return;
  }
  auto& entry = it->second;
  const uint64_t group = entry.group;
  st.engine->remove(id);
  auto progress = st.progress.find(id);
  entry.iterations_done = entry.job.iterations_before
                          + (progress == st.progress.end() ? 0 : progress->second.iterations_done);
  if (progress != st.progress.end())
    st.progress.erase(progress);
  st.set_job_state(entry, state);
  entry.reason = reason;
  leave_group(self, id, group, state);
  observe(self, departure_of(state), id, 0);
  persist(self, st.store, departure_batch(self, entry, group),
          {departure_event(state), id,
           fmt::format("group={} reason=\"{}\" cost_per_hour={:.2f}", group_name(group), reason,
                       st.engine->cost_per_hour())},
          [done] { done(caf::error{}); }, [done](caf::error err) { done(std::move(err)); });
  if (state != job_state::moved)
    consolidate(self, group);
}

cluster_scheduler_state::~cluster_scheduler_state() {
  for (auto& [id, exec] : executors)
    caf::anon_send_exit(exec, caf::exit_reason::user_shutdown);
}

void cluster_scheduler_state::put_job(const std::string& id, job_entry e) {
  auto [it, fresh] = jobs.try_emplace(id);
  if (!fresh)
    --job_counts[it->second.state];
  ++job_counts[e.state];
  it->second = std::move(e);
}

void cluster_scheduler_state::set_job_state(job_entry& e, job_state s) {
  --job_counts[e.state];
  ++job_counts[s];
  e.state = s;
}

placement_engine make_placement_engine(const cluster& c, const weave_policy& policy,
                                       bool migrate_tails) {
  auto pool = [&](const std::vector<node>& nodes) {
    std::vector<pool_node> out;
    for (auto& n : nodes) {
      const gpu_spec* gpu = c.find_gpu(n.gpu);
      out.push_back({n.id, n.gpus, n.host_memory_gb,
                     n.gpus * (gpu ? gpu->cost_per_gpu_hour : 0.0)});
    }
    return out;
  };
  return placement_engine{pool(c.rollout), pool(c.training), policy, migrate_tails};
}

cluster_scheduler_actor::behavior_type
cluster_scheduler(cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state> self,
                  cluster_scheduler_config config, store_actor store, worker_actor worker,
                  observer_actor observer) {
  auto& st = self->state;
  st.engine = std::make_unique<placement_engine>(
    make_placement_engine(config.cluster, config.policy, config.migrate_tails));
  auto names = std::make_shared<std::vector<std::string>>();
  for (auto& n : st.engine->rollout_pool())
    names->push_back(n.id);
  st.rollout_node_names = std::move(names);
  st.config = std::move(config);
  st.store = std::move(store);
  st.worker = std::move(worker);
  st.observer = std::move(observer);
  restore(self);
  return {
    [self](submit_atom, rl_job job) { return submit(self, std::move(job)); },
    [self](finish_atom, const std::string& id) -> caf::result<ok_atom> {
      return depart_and_answer(self, id, job_state::finished, "");
    },
    [self](fail_atom, const std::string& id, const std::string& reason) -> caf::result<ok_atom> {
      return depart_and_answer(self, id, job_state::failed, reason);
    },
    [self](cancel_atom, const std::string& id) -> caf::result<ok_atom> {
      return depart_and_answer(self, id, job_state::cancelled, "cancelled by an operator");
    },
    [self](node_atom, const node_report& report) { return report_node(self, report); },
    [self](drift_atom, const std::string& id, double rollout_s, double training_s,
           int64_t done_iterations) {
      replace_drifted(self, id, rollout_s, training_s, done_iterations);
    },
    [self](profiled_atom, const job_profile& p) { place_profiled(self, p); },
    [self](progress_atom, const job_progress& p) -> caf::result<ok_atom> {
      auto it = self->state.jobs.find(p.job);
      if (it == self->state.jobs.end() || it->second.state != job_state::placed
          || group_name(it->second.group) != p.group)
        return make_error(errc::job_ended,
                          fmt::format("job '{}' left group {} before its iteration count {} "
                                      "was kept",
                                      p.job, p.group, p.iterations_done));
      self->state.progress[p.job] = p;
      return ok_atom::value;
    },
    [self](jobs_atom, const std::string& after, uint32_t limit) {
      return job_statuses(self->state, after, limit);
    },
    [self](job_atom, const std::string& id) { return inspect_job(self, id); },
    [self](groups_atom) { return group_statuses(self->state); },
    [self](census_atom) { return census(self->state); },
  };
}

} // namespace loom
