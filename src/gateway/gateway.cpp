#include "gateway/gateway.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/gateway_steps.hpp"

namespace loom {

namespace gateway_steps {

constexpr uint32_t protocol_version = 1;

void send_frame(self_ptr self, const std::string& identity, v1::Envelope& e) {
  e.set_version(protocol_version);
  self->state.server->send(identity, e.SerializeAsString());
  self->state.metrics->gateway_messages("out", wire::body_name(e)).Increment();
}

void send_error(self_ptr self, const std::string& identity, uint64_t request_id,
                v1::ErrorCode code, std::string message) {
  v1::Envelope e;
  e.set_request_id(request_id);
  e.mutable_error()->set_code(code);
  e.mutable_error()->set_message(std::move(message));
  send_frame(self, identity, e);
}

void update_alive(self_ptr self) {
  auto by_role = self->state.sessions.by_role();
  for (auto role : all_values<worker_role>())
    self->state.metrics->workers_alive(std::string{to_string(role)}).Set(double(by_role[role]));
}

} // namespace gateway_steps

namespace {

using namespace gateway_steps;

void register_session(self_ptr self, const wire_frame& frame, const v1::Envelope& env) {
  auto& st = self->state;
  auto& r = env.register_();
  auto role = wire::role_of(r.role());
  if (!role || r.worker_id().empty()) {
    send_error(self, frame.identity, env.request_id(), v1::ERROR_INVALID,
               "Register needs a role and a worker_id");
    return;
  }
  if (!st.config.insecure && (!frame.authenticated || *role != frame.role)) {
    send_error(self, frame.identity, env.request_id(), v1::ERROR_FORBIDDEN,
               fmt::format("this key is registered for role '{}', not '{}'", frame.role, *role));
    return;
  }
  bool resumed = st.sessions.open(
    r.worker_id(), {frame.identity, *role, r.node(), r.job(), self->clock().now()});
  update_alive(self);
  spdlog::info("event=worker_registered worker={} role={} job={} node={} resumed={}",
               r.worker_id(), *role, r.job(), r.node(), resumed);
  reply(self, frame.identity, env.request_id(), [&](v1::Envelope& e) {
    auto* x = e.mutable_registered();
    x->set_session(r.worker_id());
    x->set_heartbeat_ms(st.config.heartbeat_ms);
    x->set_resumed(resumed);
  });
}

void handle_frame(self_ptr self, const wire_frame& frame) {
  auto& st = self->state;
  v1::Envelope env;
  if (!frame.single_part || !env.ParseFromString(frame.payload)
      || env.body_case() == v1::Envelope::BODY_NOT_SET) {
    st.metrics->gateway_messages("in", "malformed").Increment();
    send_error(self, frame.identity, env.request_id(), v1::ERROR_MALFORMED,
               "the frame is not a loom.v1.Envelope with a body");
    return;
  }
  st.metrics->gateway_messages("in", wire::body_name(env)).Increment();
  if (env.version() != protocol_version) {
    send_error(self, frame.identity, env.request_id(), v1::ERROR_UNSUPPORTED_VERSION,
               fmt::format("protocol version {} is not supported; this gateway speaks {}",
                           env.version(), protocol_version));
    return;
  }
  if (env.body_case() == v1::Envelope::kRegister) {
    register_session(self, frame, env);
    return;
  }
  // Admin requests need an admin key, not a session: the CLI connects for one request.
  const bool admin = st.config.insecure
                     || (frame.authenticated && frame.role == worker_role::admin);
  if (admin && handle_admin(self, frame.identity, env))
    return;
  auto* s = st.sessions.touch(frame.identity, self->clock().now());
  if (!s) {
    send_error(self, frame.identity, env.request_id(), v1::ERROR_NOT_REGISTERED,
               fmt::format("send Register before {}", wire::body_name(env)));
    return;
  }
  handle_worker(self, frame.identity, *s, env);
}

/// WEAVE §5.3: a worker silent too long is dead; its job fails alone, its group goes on.
void sweep(self_ptr self) {
  auto& st = self->state;
  auto limit = std::chrono::milliseconds{st.config.heartbeat_ms * st.config.heartbeat_misses};
  auto now = self->clock().now();
  for (auto& [worker, s] : st.sessions.expire(now, limit)) {
    spdlog::warn("event=worker_dead worker={} role={} job={} silent_ms={}", worker, s.role,
                 s.job,
                 std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_seen).count());
    st.metrics->workers_dead().Increment();
    if (!s.job.empty() && (s.role == worker_role::rollout || s.role == worker_role::train))
      self->request(st.scheduler, caf::infinite, fail_atom::value, s.job,
                    fmt::format("worker {} stopped sending heartbeats", worker))
        .then([](ok_atom) {}, [](caf::error&) {});
  }
  update_alive(self);
  self->delayed_send(self, std::chrono::milliseconds{st.config.heartbeat_ms}, sweep_atom::value);
}

/// Sends a command to every live session of a job.
template <class Fill>
void command_job(self_ptr self, const std::string& job, Fill fill) {
  for (auto& identity : self->state.sessions.identities_of(job)) {
    v1::Envelope e;
    fill(e);
    send_frame(self, identity, e);
  }
}

/// The executor's permit: it answers the workers waiting for it, or waits for them.
void permit(self_ptr self, const phase_grant& g) {
  auto& st = self->state;
  spdlog::info("event=phase_granted job={} phase={} gpus={} switch_s={:.2f} cold={}", g.job,
               g.phase, g.gpus, g.switch_s, g.cold);
  st.executor_of[g.job] = caf::actor_cast<group_executor_actor>(self->current_sender());
  auto now = self->clock().now();
  for (auto& w : st.grants.grant(g)) {
    st.metrics->grant_latency().Observe(std::chrono::duration<double>(now - w.since).count());
    reply(self, w.identity, w.request_id,
          [&](v1::Envelope& e) { wire::fill(*e.mutable_phase_grant(), g); });
  }
}

/// The job left its group: what waited for it goes, and its workers hear so.
void job_left(self_ptr self, const std::string& job) {
  auto& st = self->state;
  st.grants.drop(job);
  st.tail_sent.erase(job);
  auto ex = st.executor_of.find(job);
  if (ex != st.executor_of.end() && caf::actor_cast<caf::actor_addr>(ex->second)
                                      == self->current_sender())
    st.executor_of.erase(ex);
  command_job(self, job, [&](v1::Envelope& e) {
    e.mutable_job_left()->set_job(job);
    e.mutable_job_left()->set_reason("the job left its group");
  });
}

} // namespace

gateway_actor::behavior_type gateway(gateway_actor::stateful_pointer<gateway_state> self,
                                     gateway_config config, std::shared_ptr<zmq_server> server,
                                     std::shared_ptr<service_metrics> metrics) {
  auto& st = self->state;
  st.config = config;
  st.server = std::move(server);
  st.metrics = std::move(metrics);
  self->delayed_send(self, std::chrono::milliseconds{config.heartbeat_ms}, sweep_atom::value);
  return {
    [self](connect_atom, cluster_scheduler_actor scheduler, fabric_controller_actor fabric) {
      self->state.scheduler = std::move(scheduler);
      self->state.fabric = std::move(fabric);
    },
    [self](frame_atom, const wire_frame& frame) { handle_frame(self, frame); },
    [self](sweep_atom) { sweep(self); },
    // worker_actor: the executors' run permits and commands.
    [self](run_atom, const phase_grant& g) { permit(self, g); },
    [self](resize_atom, const std::string& job, int gpus) {
      command_job(self, job, [&](v1::Envelope& e) {
        e.mutable_tail_migration()->set_job(job);
        e.mutable_tail_migration()->set_gpus(uint32_t(gpus));
      });
    },
    [self](leave_atom, const std::string& job) { job_left(self, job); },
  };
}

} // namespace loom
