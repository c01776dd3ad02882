#include "scheduler/cluster_scheduler.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/error.hpp"
#include "loom.pb.h"
#include "scheduler/job_spec.hpp"
#include "scheduler/phase_costs.hpp"

namespace loom {

namespace {

using scheduler_ptr = cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state>;

int64_t now_ns(scheduler_ptr self) {
  return self->clock().now().time_since_epoch().count();
}

std::string group_name(uint64_t id) {
  return fmt::format("g{}", id);
}

std::string event_record(scheduler_ptr self, std::string kind, const std::string& subject,
                         std::string detail) {
  return encode_event(now_ns(self), std::move(kind), subject, std::move(detail));
}

std::vector<std::string> node_names(const std::vector<pool_node>& pool,
                                    const std::vector<int>& nodes) {
  std::vector<std::string> out;
  for (int n : nodes)
    out.push_back(pool[size_t(n)].id);
  return out;
}

/// The group as stored (loom.v1.Group), or an erase when it has no jobs left.
record_write group_write(const placement_engine& engine, uint64_t id) {
  auto it = engine.groups().find(id);
  if (it == engine.groups().end())
    return record_write{record_kind::groups, group_name(id), {}, true};
  v1::Group g;
  g.set_id(group_name(id));
  for (auto& j : it->second.jobs)
    g.add_job_ids(j.id);
  for (auto& n : node_names(engine.rollout_pool(), it->second.rollout_nodes))
    g.add_rollout_nodes(n);
  for (auto& n : node_names(engine.training_pool(), it->second.training_nodes))
    g.add_training_nodes(n);
  return record_write{record_kind::groups, group_name(id), g.SerializeAsString(), false};
}

record_write placement_write(const placement_engine& engine, const rl_job& job, uint64_t id,
                             const std::vector<int>& rollout_nodes) {
  v1::Placement p;
  p.set_job_id(job.id);
  p.set_group_id(group_name(id));
  int left = job.rollout_gpus;
  for (int n : rollout_nodes) {
    auto& node = engine.rollout_pool()[size_t(n)];
    auto* share = p.add_rollout();
    share->set_node(node.id);
    share->set_gpus(uint32_t(std::min(left, node.gpus)));
    left -= node.gpus;
  }
  for (int n : engine.groups().at(id).training_nodes) {
    auto& node = engine.training_pool()[size_t(n)];
    auto* share = p.add_training();
    share->set_node(node.id);
    share->set_gpus(uint32_t(node.gpus));
  }
  return record_write{record_kind::placements, job.id, p.SerializeAsString(), false};
}

void observe(scheduler_ptr self, std::string event, const std::string& job, double decision_us) {
  auto& st = self->state;
  if (!st.observer)
    return;
  self->send(st.observer, cluster_atom::value,
             cluster_record{now_ns(self), std::move(event), job, st.engine->cost_per_hour(),
                            st.engine->gpus_in_use(true), st.engine->gpus_in_use(false),
                            decision_us});
}

group_executor_actor executor_for(scheduler_ptr self, uint64_t id) {
  auto& st = self->state;
  if (auto it = st.executors.find(id); it != st.executors.end())
    return it->second;
  const auto& g = st.engine->groups().at(id);
  auto per_node = [](const std::vector<pool_node>& pool) {
    return pool.empty() ? 8 : pool.front().gpus;
  };
  group_executor_config cfg{group_name(id),
                            per_node(st.engine->rollout_pool()),
                            per_node(st.engine->training_pool()),
                            g.training_gpus,
                            st.config.policy,
                            st.config.migrate_tails};
  auto exec = self->spawn(group_executor, std::move(cfg), st.worker,
                          caf::actor_cast<cluster_scheduler_actor>(self), st.observer);
  st.executors.emplace(id, exec);
  return exec;
}

using placed_callback = std::function<void(caf::expected<placement_reply>)>;

/// Algorithm 1 (or the configured chooser), then durable, then answered and executed.
void admit(scheduler_ptr self, rl_job job, placed_callback done) {
  auto& st = self->state;
  if (auto it = st.jobs.find(job.id); it != st.jobs.end() && it->second.state == "placed") {
    done(make_error(errc::invalid_argument,
                    fmt::format("job '{}' is already placed in {}", job.id,
                                group_name(it->second.group))));
    return;
  }
  auto& engine = *st.engine;
  derive_phase_costs(job, st.config.cluster, st.config.policy);
  auto t0 = std::chrono::steady_clock::now();
  auto d = st.config.choose ? st.config.choose(engine, job) : engine.place(job);
  double decision_us =
    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  placement_reply reply;
  reply.job = job.id;
  reply.kind = to_string(d.kind);
  reply.reason = d.reason;
  reply.delta_cost_per_hour = d.delta_cost_per_hour;
  write_batch batch;
  batch.sync = st.config.sync_writes;
  if (d.kind == placement_kind::rejected) {
    batch.records.push_back(
      {record_kind::jobs, job.id, job_record(job, v1::JOB_STATE_REJECTED, "", d.reason), false});
    batch.events.push_back(event_record(self, "job_rejected", job.id, d.reason));
  } else {
    engine.commit(job, d);
    auto& g = engine.groups().at(d.group);
    reply.group = group_name(d.group);
    reply.rollout_nodes = node_names(engine.rollout_pool(), d.rollout_nodes);
    reply.training_nodes = node_names(engine.training_pool(), g.training_nodes);
    batch.records.push_back({record_kind::jobs, job.id,
                             job_record(job, v1::JOB_STATE_PLACED, reply.group, ""), false});
    batch.records.push_back(placement_write(engine, job, d.group, d.rollout_nodes));
    batch.records.push_back(group_write(engine, d.group));
    batch.events.push_back(
      event_record(self, "job_placed", job.id,
                   fmt::format("{} in {} (+{:.2f} $/h)", reply.kind, reply.group,
                               d.delta_cost_per_hour)));
  }
  reply.cost_per_hour = engine.cost_per_hour();
  self->request(st.store, caf::infinite, write_atom::value, std::move(batch))
    .then(
      [self, job, d, reply, decision_us, done](uint64_t) mutable {
        auto& st = self->state;
        if (d.kind == placement_kind::rejected) {
          st.jobs[job.id] = {job, "rejected", 0, d.reason};
          spdlog::info("event=job_rejected job={} reason=\"{}\"", job.id, d.reason);
        } else {
          st.jobs[job.id] = {job, "placed", d.group, ""};
          spdlog::info("event=job_placed job={} decision={} group={} delta_cost_per_hour={:.2f} "
                       "cost_per_hour={:.2f} decision_us={:.1f}",
                       job.id, reply.kind, reply.group, d.delta_cost_per_hour,
                       reply.cost_per_hour, decision_us);
          self->send(executor_for(self, d.group), join_atom::value, job, d.rollout_nodes);
        }
        observe(self, reply.kind, job.id, decision_us);
        done(std::move(reply));
      },
      [self, job, d, done](caf::error& err) {
        // Not durable, so not decided: undo it and say why.
        if (d.kind != placement_kind::rejected)
          self->state.engine->remove(job.id);
        spdlog::error("event=job_decision_not_stored job={} error=\"{}\"", job.id, render(err));
        done(std::move(err));
      });
}

/// A placed job leaves (finished, failed, drifted): its group goes on without it.
void depart(scheduler_ptr self, const std::string& id, const std::string& state,
            const std::string& reason, std::function<void(caf::error)> done) {
  auto& st = self->state;
  auto it = st.jobs.find(id);
  if (it == st.jobs.end() || it->second.state != "placed") {
    done(make_error(errc::not_found, fmt::format("no placed job '{}'", id)));
    return;
  }
  auto& entry = it->second;
  const uint64_t group = entry.group;
  st.engine->remove(id);
  entry.state = state;
  entry.reason = reason;
  if (auto ex = st.executors.find(group); ex != st.executors.end()) {
    self->send(ex->second, leave_atom::value, id);
    if (!st.engine->groups().count(group)) {
      self->send_exit(ex->second, caf::exit_reason::user_shutdown);
      st.executors.erase(ex);
    }
  }
  int proto_state = state == "finished" ? v1::JOB_STATE_FINISHED
                    : state == "failed" ? v1::JOB_STATE_FAILED
                                        : v1::JOB_STATE_CANCELLED;
  write_batch batch;
  batch.sync = st.config.sync_writes;
  batch.records.push_back(
    {record_kind::jobs, id, job_record(entry.job, proto_state, "", reason), false});
  batch.records.push_back({record_kind::placements, id, {}, true});
  batch.records.push_back(group_write(*st.engine, group));
  batch.events.push_back(event_record(self, "job_" + state, id, reason));
  spdlog::info("event=job_{} job={} group={} reason=\"{}\" cost_per_hour={:.2f}", state, id,
               group_name(group), reason, st.engine->cost_per_hour());
  observe(self, state == "drifted" ? "drifted" : "left", id, 0);
  self->request(st.store, caf::infinite, write_atom::value, std::move(batch))
    .then([done](uint64_t) { done(caf::error{}); }, [done](caf::error& err) { done(err); });
}

/// After a restart: the jobs the store kept. Placed ones go through admission again (their
/// groups and executors are rebuilt, the same decisions for the same jobs in the same order);
/// finished, failed, rejected and cancelled ones are listed as they ended.
void restore(scheduler_ptr self) {
  auto& st = self->state;
  size_t readmitted = 0;
  for (auto& r : st.config.restore) {
    v1::Job rec;
    auto job = job_from_record(r.value);
    if (!job || !rec.ParseFromString(r.value)) {
      spdlog::warn("event=job_restore_skipped job={}", r.key);
      continue;
    }
    switch (rec.state()) {
      case v1::JOB_STATE_PLACED:
      case v1::JOB_STATE_RUNNING:
      case v1::JOB_STATE_PENDING:
        ++readmitted;
        admit(self, *job, [id = job->id](caf::expected<placement_reply> p) {
          if (!p)
            spdlog::error("event=job_restore_failed job={} error=\"{}\"", id, render(p.error()));
        });
        break;
      default: {
        auto state = rec.state() == v1::JOB_STATE_FINISHED   ? "finished"
                     : rec.state() == v1::JOB_STATE_FAILED   ? "failed"
                     : rec.state() == v1::JOB_STATE_REJECTED ? "rejected"
                                                             : "cancelled";
        st.jobs[job->id] = {*job, state, 0, rec.reason()};
      }
    }
  }
  if (!st.config.restore.empty())
    spdlog::info("event=scheduler_restored jobs={} readmitted={}", st.config.restore.size(),
                 readmitted);
}

/// The executor running a placed job, if any.
std::optional<group_executor_actor> executor_of(scheduler_ptr self, const std::string& id) {
  auto& st = self->state;
  auto it = st.jobs.find(id);
  if (it == st.jobs.end() || it->second.state != "placed")
    return std::nullopt;
  auto ex = st.executors.find(it->second.group);
  if (ex == st.executors.end())
    return std::nullopt;
  return ex->second;
}

caf::result<ok_atom> depart_and_answer(scheduler_ptr self, const std::string& id,
                                       const std::string& state, const std::string& reason) {
  auto rp = self->make_response_promise<ok_atom>();
  depart(self, id, state, reason, [rp](caf::error err) mutable {
    if (err)
      rp.deliver(std::move(err));
    else
      rp.deliver(ok_atom::value);
  });
  return rp;
}

} // namespace

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
  return placement_engine{pool(c.rollout), pool(c.training), policy.max_group_size,
                          migrate_tails ? policy.tail_migration_cost_s : 0.0};
}

cluster_scheduler_actor::behavior_type
cluster_scheduler(cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state> self,
                  cluster_scheduler_config config, store_actor store, worker_actor worker,
                  observer_actor observer) {
  auto& st = self->state;
  st.engine = std::make_unique<placement_engine>(
    make_placement_engine(config.cluster, config.policy, config.migrate_tails));
  st.config = std::move(config);
  st.store = std::move(store);
  st.worker = std::move(worker);
  st.observer = std::move(observer);
  restore(self);
  return {
    [self](submit_atom, rl_job job) -> caf::result<placement_reply> {
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
    },
    [self](finish_atom, const std::string& id) -> caf::result<ok_atom> {
      return depart_and_answer(self, id, "finished", "");
    },
    [self](fail_atom, const std::string& id, const std::string& reason) -> caf::result<ok_atom> {
      return depart_and_answer(self, id, "failed", reason);
    },
    [self](cancel_atom, const std::string& id) -> caf::result<ok_atom> {
      return depart_and_answer(self, id, "cancelled", "cancelled by an operator");
    },
    [self](done_atom, const std::string& id, phase_kind phase, double solo_s) {
      if (auto ex = executor_of(self, id))
        self->send(*ex, done_atom::value, id, phase, solo_s);
    },
    [self](tail_atom, const std::string& id) {
      if (auto ex = executor_of(self, id))
        self->send(*ex, tail_atom::value, id);
    },
    [self](drift_atom, const std::string& id, double rollout_s, double training_s,
           int64_t done_iterations) {
      auto it = self->state.jobs.find(id);
      if (it == self->state.jobs.end() || it->second.state != "placed")
        return;
      rl_job job = it->second.job;
      job.rollout_s = rollout_s;
      job.training_s = training_s;
      if (job.iterations > 0)
        job.iterations = std::max<int64_t>(1, job.iterations - done_iterations);
      depart(self, id, "drifted", "measured phases saturate its group",
             [self, job](caf::error err) {
               if (err)
                 return;
               admit(self, job, [id = job.id](caf::expected<placement_reply> r) {
                 if (!r)
                   spdlog::error("event=drift_replacement_failed job={} error=\"{}\"", id,
                                 render(r.error()));
               });
             });
    },
    [self](jobs_atom) {
      std::vector<job_status> out;
      for (auto& [id, e] : self->state.jobs)
        out.push_back({id, e.state, e.state == "placed" ? group_name(e.group) : "", e.job.slo,
                       e.job.solo_s(), e.reason});
      return out;
    },
    [self](groups_atom) {
      std::vector<group_status> out;
      auto& engine = *self->state.engine;
      for (auto& [id, g] : engine.groups()) {
        group_status s{group_name(id), {}, node_names(engine.rollout_pool(), g.rollout_nodes),
                       node_names(engine.training_pool(), g.training_nodes), g.is_saturated, 0};
        for (auto& j : g.jobs)
          s.jobs.push_back(j.id);
        for (int n : g.rollout_nodes)
          s.cost_per_hour += engine.rollout_pool()[size_t(n)].cost_per_hour;
        for (int n : g.training_nodes)
          s.cost_per_hour += engine.training_pool()[size_t(n)].cost_per_hour;
        out.push_back(std::move(s));
      }
      return out;
    },
  };
}

} // namespace loom
