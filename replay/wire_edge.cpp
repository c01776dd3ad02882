#include "replay/wire_edge.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <set>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/proto_enums.hpp"
#include "scheduler/job_spec.hpp"
#include "scheduler/phase_costs.hpp"

namespace loom::replay {

int64_t drive_context::sim_ns(caf::timespan clock_now) const {
  return int64_t(double((clock_now - origin).count()) * time_scale);
}

namespace {

using answer_fn = std::function<void(std::optional<v1::Envelope>)>;

template <class Self>
int64_t now_ns(Self* self) {
  return self->state.ctx->sim_ns(self->clock().now().time_since_epoch());
}

/// A loom.v1 request from an actor that must not block: the answer comes back as a message.
template <class Self>
void wire_call(Self* self, client& c, v1::Envelope e, answer_fn then) {
  auto token = self->state.next_token++;
  self->state.answers.emplace(token, std::move(then));
  c.call_async(std::move(e), [to = caf::actor_cast<caf::actor>(self),
                              token](std::optional<v1::Envelope> r) {
    caf::anon_send(to, answer_atom::value, token, r ? r->SerializeAsString() : std::string{});
  });
}

template <class Self>
void answered(Self* self, uint64_t token, const std::string& bytes) {
  auto it = self->state.answers.find(token);
  if (it == self->state.answers.end())
    return;
  auto then = std::move(it->second);
  self->state.answers.erase(it);
  std::optional<v1::Envelope> reply;
  if (!bytes.empty()) {
    reply.emplace();
    reply->ParseFromString(bytes);
  }
  then(std::move(reply));
}

std::string error_text(const std::optional<v1::Envelope>& r) {
  if (!r)
    return "no answer";
  return r->has_error() ? v1::ErrorCode_Name(r->error().code()) + ": " + r->error().message()
                        : "unexpected reply";
}

// -- the scheduler's stand-in -------------------------------------------------------------------

using scheduler_ptr = wire_scheduler_actor::stateful_pointer<wire_scheduler_state>;

/// The cluster after an event, as the service's groups show it, recorded at the event's time.
void record_cluster(scheduler_ptr self, cluster_event event, const std::string& job) {
  auto t = now_ns(self);
  v1::Envelope e;
  e.mutable_list_groups();
  wire_call(self, *self->state.admin, e, [self, event, job, t](std::optional<v1::Envelope> r) {
    auto& ctx = *self->state.ctx;
    if (!r || !r->has_group_list()) {
      ++ctx.wire_errors;
      return;
    }
    std::set<std::string> used;
    for (auto& g : r->group_list().groups()) {
      used.insert(g.rollout_nodes().begin(), g.rollout_nodes().end());
      used.insert(g.training_nodes().begin(), g.training_nodes().end());
    }
    cluster_record rec{t, event, job, 0, 0, 0, 0};
    for (auto* pool : {&ctx.pools->rollout_pool(), &ctx.pools->training_pool()})
      for (auto& n : *pool)
        if (used.count(n.id)) {
          rec.cost_per_hour += n.cost_per_hour;
          (pool == &ctx.pools->rollout_pool() ? rec.rollout_gpus : rec.training_gpus) += n.gpus;
        }
    std::lock_guard<std::mutex> lock{ctx.mutex};
    ctx.log.cluster.push_back(rec);
  });
}

int training_gpus_of(const drive_context& ctx, const v1::SubmitReply& r) {
  int gpus = 0;
  for (auto& n : ctx.pools->training_pool())
    for (auto& id : r.training_nodes())
      gpus += n.id == id ? n.gpus : 0;
  return gpus;
}

/// The service's answer to a submission, as the frameworks take it; a placed job gets its
/// worker session.
placement_reply placed(scheduler_ptr self, const rl_job& job, const v1::SubmitReply& r) {
  auto& st = self->state;
  auto kind = read_either<placement_kind>(r.placement(), r.outcome())
                .value_or(placement_kind::rejected);
  placement_reply reply{job.id, kind, r.group(), {}, {}, 0, r.cost_per_hour(), r.reason(),
                        r.group_cost_per_hour()};
  {
    std::lock_guard<std::mutex> lock{st.ctx->mutex};
    st.ctx->last_state[job.id] = kind == placement_kind::rejected ? job_state::rejected
                                                                   : job_state::placed;
  }
  record_cluster(self, event_of(kind), job.id);
  if (kind != placement_kind::rejected) {
    rl_job costed = job;
    derive_phase_costs(costed, st.ctx->config.cluster, st.ctx->config.policy.weave);
    st.jobs[job.id] = self->spawn<caf::linked>(wire_job, st.ctx, costed, r.group(),
                                  training_gpus_of(*st.ctx, r), st.frameworks,
                                  caf::actor_cast<wire_scheduler_actor>(self));
  }
  return reply;
}

caf::result<placement_reply> submit(scheduler_ptr self, const rl_job& job) {
  auto rp = self->make_response_promise<placement_reply>();
  v1::Envelope e;
  e.mutable_submit_job()->set_spec_toml(format_job_spec(job));
  e.mutable_submit_job()->set_source("loom drive");
  wire_call(self, *self->state.admin, e, [self, job, rp](std::optional<v1::Envelope> r) mutable {
    if (r && r->has_submit_reply()) {
      rp.deliver(placed(self, job, r->submit_reply()));
      return;
    }
    ++self->state.ctx->wire_errors;
    rp.deliver(make_error(errc::invalid_argument, error_text(r)));
  });
  return rp;
}

/// The job left its group (its worker heard so) or crashed (the frameworks say so).
void departed(scheduler_ptr self, const std::string& job, job_state why) {
  auto& st = self->state;
  {
    std::lock_guard<std::mutex> lock{st.ctx->mutex};
    st.ctx->last_state[job] = why;
  }
  record_cluster(self, departure_of(why), job);
  if (!placed_again(why))
    st.jobs.erase(job);
}

caf::error unavailable(const char* what) {
  return make_error(errc::invalid_argument, fmt::format("loom drive does not {}", what));
}

// -- a job's worker session ---------------------------------------------------------------------

using job_ptr = wire_job_actor::stateful_pointer<wire_job_state>;

void acquire(job_ptr self, phase_kind phase);

void ended(job_ptr self, job_state why) {
  auto& st = self->state;
  if (st.ended)
    return;
  st.ended = !placed_again(why);
  self->send(st.frameworks, leave_atom::value, st.job.id, why);
  self->send(st.scheduler, leave_atom::value, st.job.id, why);
}

/// A permit: the simulated framework runs the phase; its report comes back as done_atom.
void granted(job_ptr self, const v1::PhaseGrant& g, phase_kind phase) {
  self->send(self->state.frameworks, run_atom::value,
             phase_grant{self->state.job.id, phase, int(g.gpus()), g.switch_s(), g.cold(),
                         int64_t(g.iteration()), g.group()});
}

void acquire(job_ptr self, phase_kind phase) {
  auto& st = self->state;
  v1::Envelope e;
  e.mutable_phase_acquire()->set_job(st.job.id);
  e.mutable_phase_acquire()->set_phase(v1::Phase(int(phase) + 1));
  wire_call(self, *st.session, e, [self, phase](std::optional<v1::Envelope> r) {
    if (r && r->has_phase_grant())
      granted(self, r->phase_grant(), phase);
    else if (r && r->has_error() && r->error().code() == v1::ERROR_RESTART_ITERATION)
      acquire(self, phase_kind::rollout);
    else if (!(r && r->has_error() && r->error().code() == v1::ERROR_JOB_ENDED))
      ++self->state.ctx->wire_errors;
  });
}

caf::result<ok_atom> done(job_ptr self, phase_kind phase, double solo_s) {
  auto& st = self->state;
  auto rp = self->make_response_promise<ok_atom>();
  v1::Envelope e;
  e.mutable_phase_release()->set_job(st.job.id);
  e.mutable_phase_release()->set_phase(v1::Phase(int(phase) + 1));
  e.mutable_phase_release()->set_solo_s(solo_s);
  const auto sent = self->clock().now();
  wire_call(self, *st.session, e,
            [self, phase, solo_s, rp, sent](std::optional<v1::Envelope> r) mutable {
    auto& st = self->state;
    {
      std::lock_guard<std::mutex> lock{st.ctx->mutex};
      st.ctx->release_lag_s.push_back(
        std::chrono::duration<double>(self->clock().now() - sent).count() * st.ctx->time_scale);
    }
    if (!r || !r->has_ok()) {
      rp.deliver(make_error(errc::out_of_turn, error_text(r)));
      return;
    }
    // The iteration as the executor counts it (WEAVE §4.3), on the frameworks' clock.
    auto end = st.ledger->phase_done(st.job.id, phase, solo_s, now_ns(self));
    if (end) {
      std::lock_guard<std::mutex> lock{st.ctx->mutex};
      st.ctx->log.iterations.push_back(end->record);
    }
    rp.deliver(ok_atom::value);
    if (!end || !end->completed)
      acquire(self, phase == phase_kind::sync ? phase_kind::rollout : phase_kind(int(phase) + 1));
  });
  return rp;
}

void command(job_ptr self, const std::string& bytes) {
  v1::Envelope e;
  if (!e.ParseFromString(bytes))
    return;
  auto& st = self->state;
  if (e.has_tail_migration())
    self->send(st.frameworks, resize_atom::value,
               gpu_resize{st.job.id, int(e.tail_migration().gpus()), {}});
  else if (e.has_job_left())
    ended(self, from_proto(e.job_left().state()).value_or(job_state::finished));
}

/// An ended job's worker goes once nothing it asked is still unanswered (the release of the
/// last sync is answered after the job-left notice).
void leave_when_done(job_ptr self) {
  auto& st = self->state;
  if (!st.ended || !st.answers.empty())
    return;
  st.session->goodbye("job ended", false);
  self->quit();
}

/// Registered: the job joins; its Init takes the cold start the executor's schedule expects.
void registered(job_ptr self) {
  auto& st = self->state;
  const auto& c = st.ctx->config.cluster;
  const int per_rollout = gpus_per_node(c.rollout);
  const int per_training = gpus_per_node(c.training);
  st.ledger.emplace(st.group, st.training_gpus);
  st.ledger->join({st.job, {}}, now_ns(self));
  auto staging = staging_s(member_switches(st.job, per_rollout, per_training, st.training_gpus,
                                           st.ctx->config.policy.weave));
  self->send(st.frameworks, join_atom::value, member_joined{st.job.id, st.group, staging});
}

void start_session(job_ptr self) {
  auto& st = self->state;
  st.session = std::make_unique<client>(st.ctx->worker);
  st.session->on_command([to = caf::actor_cast<caf::actor>(self)](const v1::Envelope& e) {
    caf::anon_send(to, command_atom::value, e.SerializeAsString());
  });
  v1::Envelope reg;
  auto* r = reg.mutable_register_();
  r->set_role(v1::ROLE_DRIVER);
  r->set_worker_id("drive-" + st.job.id);
  r->set_job(st.job.id);
  wire_call(self, *st.session, reg, [self](std::optional<v1::Envelope> r) {
    if (r && r->has_registered())
      registered(self);
    else
      ++self->state.ctx->wire_errors;
  });
}

} // namespace

wire_scheduler_actor::behavior_type
wire_scheduler(wire_scheduler_actor::stateful_pointer<wire_scheduler_state> self,
               std::shared_ptr<drive_context> ctx, simulated_frameworks_actor frameworks) {
  self->state.admin = std::make_unique<client>(ctx->admin);
  self->state.ctx = std::move(ctx);
  self->state.frameworks = std::move(frameworks);
  return {
    [self](submit_atom, const rl_job& job) { return submit(self, job); },
    [self](fail_atom, const std::string& job, const std::string&) -> caf::result<ok_atom> {
      // A simulated crash: the job's worker says so and goes (WEAVE §5.3).
      if (auto it = self->state.jobs.find(job); it != self->state.jobs.end())
        self->send(it->second, leave_atom::value, job, job_state::failed);
      departed(self, job, job_state::failed);
      return ok_atom::value;
    },
    [self](leave_atom, const std::string& job, job_state why) { departed(self, job, why); },
    [self](answer_atom, uint64_t token, const std::string& bytes) {
      answered(self, token, bytes);
    },
    [](finish_atom, const std::string&) -> caf::result<ok_atom> {
      return unavailable("finish jobs");
    },
    [](cancel_atom, const std::string&) -> caf::result<ok_atom> {
      return unavailable("cancel jobs");
    },
    [](node_atom, const node_report&) -> caf::result<node_outcome> {
      return unavailable("report nodes");
    },
    [](drift_atom, const std::string&, double, double, int64_t) {},
    [](profiled_atom, const job_profile&) {},
    [](progress_atom, const job_progress&) { return ok_atom::value; },
    [](jobs_atom, const std::string&, uint32_t) { return std::vector<job_status>{}; },
    [](job_atom, const std::string&) -> caf::result<job_status> {
      return unavailable("inspect jobs");
    },
    [](groups_atom) { return std::vector<group_status>{}; },
    [](census_atom) { return scheduler_census{}; },
  };
}

wire_job_actor::behavior_type wire_job(wire_job_actor::stateful_pointer<wire_job_state> self,
                                       std::shared_ptr<drive_context> ctx, rl_job job,
                                       std::string group, int training_gpus,
                                       simulated_frameworks_actor frameworks,
                                       wire_scheduler_actor scheduler) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.job = std::move(job);
  st.group = std::move(group);
  st.training_gpus = training_gpus;
  st.frameworks = std::move(frameworks);
  st.scheduler = std::move(scheduler);
  start_session(self);
  return {
    [self](staged_atom, const std::string&) { acquire(self, phase_kind::rollout); },
    [self](done_atom, const std::string&, phase_kind phase, double solo_s) {
      return done(self, phase, solo_s);
    },
    // Simulated frameworks measure no host memory: their jobs give it in their specs.
    [](footprint_atom, const std::string&, phase_kind, double) {},
    [self](tail_atom, const std::string& job) {
      // WEAVE §4.3: the tail threshold of the rollout's responses is done.
      const double t = self->state.ctx->config.policy.weave.tail_migration_threshold;
      self->state.session->progress(job, uint32_t(std::ceil(t * 1000)), 1000);
    },
    [self](leave_atom, const std::string&, job_state) {
      // The frameworks crashed the job: its worker says so and goes.
      self->state.session->goodbye("simulated crash", false, true);
      self->state.ended = true;
      self->quit();
    },
    [self](command_atom, const std::string& bytes) {
      command(self, bytes);
      leave_when_done(self);
    },
    [self](answer_atom, uint64_t token, const std::string& bytes) {
      answered(self, token, bytes);
      leave_when_done(self);
    },
    [](join_atom, const group_member&) {},
    [](restore_atom, const group_member&, const job_progress&) {},
    [](status_atom, const std::string& job) { return member_status{job}; },
    [](overrun_atom, int64_t) {},
  };
}

} // namespace loom::replay
