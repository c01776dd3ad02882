#include "gateway/gateway.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/field_limits.hpp"
#include "gateway/gateway_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"

namespace loom {

namespace gateway_steps {

constexpr uint32_t protocol_version = 1;

enum class direction { in, out };

/// The frame's loom_gateway_messages_total counter.
prometheus::Counter& messages(self_ptr self, direction d, const v1::Envelope& e) {
  auto& cache = self->state.message_counters[size_t(d)];
  const auto body = size_t(e.body_case());
  if (body >= cache.size())
    cache.resize(body + 1, nullptr);
  if (!cache[body])
    cache[body] = &self->state.metrics->gateway_messages(d == direction::in ? "in" : "out",
                                                         wire::body_name(e));
  return *cache[body];
}

void send_frame(self_ptr self, const std::string& identity, v1::Envelope& e) {
  e.set_version(protocol_version);
  self->state.server->send(identity, e.SerializeAsString());
  messages(self, direction::out, e).Increment();
}

void send_error(self_ptr self, const std::string& identity, uint64_t request_id,
                v1::ErrorCode code, std::string message) {
  v1::Envelope e;
  e.set_request_id(request_id);
  e.mutable_error()->set_code(code);
  e.mutable_error()->set_message(std::move(message));
  send_frame(self, identity, e);
}

void send_failure(self_ptr self, const std::string& identity, uint64_t request_id,
                  const caf::error& err) {
  send_error(self, identity, request_id, wire::error_code(code_of(err)), message_of(err));
}

void update_alive(self_ptr self) {
  auto by_role = self->state.sessions.by_role();
  for (auto role : all_values<worker_role>())
    self->state.metrics->workers_alive(std::string{to_string(role)}).Set(double(by_role[role]));
}

} // namespace gateway_steps

namespace {

using namespace gateway_steps;

std::chrono::milliseconds alive_limit(const gateway_config& c) {
  return std::chrono::milliseconds{c.heartbeat_ms * c.heartbeat_misses};
}

/// The refusal of a worker id the table will not give to this registrant, or nothing.
std::optional<std::pair<v1::ErrorCode, std::string>>
refusal(const gateway_config& c, const std::string& worker_id, open_outcome outcome) {
  if (outcome == open_outcome::forbidden)
    return std::pair{v1::ERROR_FORBIDDEN,
                     fmt::format("worker id '{}' is registered with another key or role",
                                 worker_id)};
  if (outcome == open_outcome::conflict)
    return std::pair{v1::ERROR_CONFLICT,
                     fmt::format("worker id '{}' is held by a live session of another process; "
                                 "it is freed after {} ms without heartbeats",
                                 worker_id, alive_limit(c).count())};
  return std::nullopt;
}

/// Opens the session; `admit`, when given, may still refuse it (an engine its deployment does
/// not take): the worker hears Registered or the refusal once it has decided.
void open_session(self_ptr self, const std::string& identity, uint64_t rid,
                  const std::string& worker_id, session s, admission admit = {}) {
  auto& st = self->state;
  auto outcome = st.sessions.open(worker_id, s, alive_limit(st.config));
  if (auto no = refusal(st.config, worker_id, outcome)) {
    send_error(self, identity, rid, no->first, no->second);
    return;
  }
  update_alive(self);
  // Open before it is admitted: what the admission sends the worker finds its session.
  auto answer = [self, identity, rid, worker_id, s, outcome](const caf::error& err) {
    auto& st = self->state;
    if (err) {
      st.sessions.close(identity);
      update_alive(self);
      send_failure(self, identity, rid, err);
      return;
    }
    spdlog::info("event=worker_registered worker={} role={} job={} deployment={} node={} "
                 "resumed={}",
                 worker_id, s.role, s.job.empty() ? s.owner : s.job, s.deployment, s.node,
                 outcome == open_outcome::resumed);
    reply(self, identity, rid, [&](v1::Envelope& e) {
      auto* x = e.mutable_registered();
      x->set_session(worker_id);
      x->set_heartbeat_ms(st.config.heartbeat_ms);
      x->set_resumed(outcome == open_outcome::resumed);
      if (auto tick = st.config.stats_interval_ms.find(s.deployment);
          s.role == worker_role::gen_instance && tick != st.config.stats_interval_ms.end())
        x->set_stats_interval_ms(tick->second);
    });
  };
  if (admit)
    admit(std::move(answer));
  else
    answer(caf::error{});
}

/// A job's worker registers only for a job the scheduler has and that has not ended.
void open_job_session(self_ptr self, const std::string& identity, uint64_t rid,
                      const std::string& worker_id, session s) {
  auto job = s.job;
  self->request(self->state.scheduler, caf::infinite, job_atom::value, job)
    .then(
      [=](const job_status& js) {
        if (js.state != job_state::placed && !placed_again(js.state))
          send_error(self, identity, rid, v1::ERROR_JOB_ENDED,
                     fmt::format("job '{}' is {}{}", job, js.state,
                                 js.reason.empty() ? "" : ": " + js.reason));
        else
          open_session(self, identity, rid, worker_id, s);
      },
      [=](caf::error& err) {
        send_error(self, identity, rid, wire::error_code(code_of(err)),
                   fmt::format("{}: submit the job before its workers register",
                               message_of(err)));
      });
}

void register_session(self_ptr self, const wire_frame& frame, const v1::Envelope& env) {
  auto& st = self->state;
  auto& r = env.register_();
  auto rid = env.request_id();
  auto role = wire::role_of(r.role());
  if (!role || r.worker_id().empty()) {
    send_error(self, frame.identity, rid, v1::ERROR_INVALID,
               "Register needs a role and a worker_id");
    return;
  }
  if (!st.config.insecure && (!frame.authenticated || *role != frame.role)) {
    send_error(self, frame.identity, rid, v1::ERROR_FORBIDDEN,
               fmt::format("this key is registered for role '{}', not '{}'", frame.role, *role));
    return;
  }
  if ((runs_job(*role) || announces_fabric(*role)) && r.job().empty()) {
    send_error(self, frame.identity, rid, v1::ERROR_INVALID,
               fmt::format("a {} session names the job it works for", *role));
    return;
  }
  if (*role == worker_role::ocs_agent && r.device().empty()) {
    send_error(self, frame.identity, rid, v1::ERROR_INVALID,
               "an ocs-agent session names the device it drives");
    return;
  }
  if (serves_generation(*role) && r.deployment().empty()) {
    send_error(self, frame.identity, rid, v1::ERROR_INVALID,
               fmt::format("a {} session names the deployment it serves", *role));
    return;
  }
  session s{frame.identity,      *role,     r.node(),        runs_job(*role) ? r.job() : "",
            self->clock().now(), frame.key, r.incarnation(),
            serves_generation(*role) ? r.deployment() : "",
            *role == worker_role::ocs_agent ? r.device() : "",
            runs_job(*role) ? r.data_address() : "",
            announces_fabric(*role) ? r.job() : ""};
  auto outcome = st.sessions.check(r.worker_id(), s, alive_limit(st.config));
  if (auto no = refusal(st.config, r.worker_id(), outcome)) {
    send_error(self, frame.identity, rid, no->first, no->second);
    return;
  }
  if (outcome == open_outcome::opened
      && st.sessions.sessions_of_key(frame.key) >= st.config.sessions_per_key) {
    st.metrics->gateway_limited("sessions").Increment();
    send_error(self, frame.identity, rid, v1::ERROR_RATE_LIMITED,
               fmt::format("this key holds {} live sessions, its limit",
                           st.config.sessions_per_key));
    return;
  }
  if (runs_job(*role))
    open_job_session(self, frame.identity, rid, r.worker_id(), std::move(s));
  else if (serves_generation(*role)) {
    if (auto admit = deployment_admission(self, frame.identity, rid, r, s))
      open_session(self, frame.identity, rid, r.worker_id(), std::move(s), std::move(*admit));
  } else if (*role == worker_role::ocs_agent) {
    if (auto admit = agent_admission(self, frame.identity, rid, r.worker_id(), s))
      open_session(self, frame.identity, rid, r.worker_id(), std::move(s), std::move(*admit));
  } else
    open_session(self, frame.identity, rid, r.worker_id(), std::move(s));
}

/// A session (or, for frames of no session, a key) over its frame rate: the frame is answered
/// RATE_LIMITED (when it asks for an answer) and not handled; one log line a second per key
/// says how many were refused.
void rate_limited(self_ptr self, const wire_frame& frame, const v1::Envelope& env, bool parsed,
                  const std::string* worker) {
  auto& st = self->state;
  st.metrics->gateway_limited("rate").Increment();
  const uint32_t limit =
    worker ? st.config.frames_per_s_per_session : st.config.frames_per_s_per_key;
  auto now = self->clock().now();
  auto [it, fresh] = st.limited_log.try_emplace(frame.key, now, 0);
  ++it->second.second;
  if (fresh || now - it->second.first >= std::chrono::seconds{1}) {
    spdlog::warn("event=gateway_rate_limited key={} worker={} refused={} limit_per_s={}",
                 frame.key.substr(0, 12), worker ? *worker : "", it->second.second, limit);
    it->second = {now, 0};
  }
  if (parsed && env.request_id() != 0)
    send_error(self, frame.identity, env.request_id(), v1::ERROR_RATE_LIMITED,
               fmt::format("this {} sent more than {} frames a second",
                           worker ? "session" : "key", limit));
}

/// A registered session's frames count against its own connection's budget, so that the
/// engines of a deployment sharing one key each have theirs; anything else against its key's.
bool within_rate(self_ptr self, const wire_frame& frame, const std::string* worker) {
  auto& st = self->state;
  const auto now = self->clock().now();
  return worker ? st.session_limiter.admit(frame.identity, now)
                : st.limiter.admit(frame.key, now);
}

void handle_frame(self_ptr self, const wire_frame& frame) {
  auto& st = self->state;
  v1::Envelope env;
  if (const auto* worker = st.sessions.worker_of(frame.identity);
      !within_rate(self, frame, worker)) {
    rate_limited(self, frame, env, frame.single_part && env.ParseFromString(frame.payload),
                 worker);
    return;
  }
  if (!frame.single_part || !env.ParseFromString(frame.payload)
      || env.body_case() == v1::Envelope::BODY_NOT_SET) {
    st.metrics->gateway_messages("in", "malformed").Increment();
    send_error(self, frame.identity, env.request_id(), v1::ERROR_MALFORMED,
               "the frame is not a loom.v1.Envelope with a body");
    return;
  }
  messages(self, direction::in, env).Increment();
  if (env.version() != protocol_version) {
    send_error(self, frame.identity, env.request_id(), v1::ERROR_UNSUPPORTED_VERSION,
               fmt::format("protocol version {} is not supported; this gateway speaks {}",
                           env.version(), protocol_version));
    return;
  }
  // No field is longer than the frame: one within the smallest limit needs no walk.
  if (auto oversized = frame.payload.size() <= wire::max_id_bytes ? std::nullopt
                                                                   : wire::oversized_field(env)) {
    st.metrics->gateway_messages("in", "oversized").Increment();
    send_error(self, frame.identity, env.request_id(), v1::ERROR_TOO_LARGE, *oversized);
    return;
  }
  if (st.stopping) {
    if (env.request_id() != 0)
      send_error(self, frame.identity, env.request_id(), v1::ERROR_STOPPING,
                 "the service is stopping: register again with the next one");
    return;
  }
  if (env.body_case() == v1::Envelope::kRegister) {
    register_session(self, frame, env);
    return;
  }
  // Admin requests need an admin key, not a session: the CLI connects for one request. An
  // OpusJobEnd is a shim's for its own job from its session, or an operator's for any job.
  const bool operators = env.body_case() == v1::Envelope::kOpusJobEnd
                         && !st.sessions.worker_of(frame.identity);
  if (is_admin_request(env) || operators) {
    if (st.config.insecure || (frame.authenticated && frame.role == worker_role::admin))
      handle_admin(self, frame.identity, env);
    else
      send_error(self, frame.identity, env.request_id(), v1::ERROR_FORBIDDEN,
                 fmt::format("{} needs an admin key (security.clients admin)",
                             wire::body_name(env)));
    return;
  }
  auto* s = st.sessions.touch(frame.identity, self->clock().now());
  if (!s) {
    send_error(self, frame.identity, env.request_id(), v1::ERROR_NOT_REGISTERED,
               fmt::format("send Register before {}", wire::body_name(env)));
    return;
  }
  handle_worker(self, frame.identity, *s, env);
}

/// Schedules the next liveness sweep, one heartbeat interval from now.
void next_sweep(self_ptr self) {
  const std::chrono::milliseconds every{self->state.config.heartbeat_ms};
  self->state.sweep_due = self->clock().now() + every;
  self->delayed_send(self, every, sweep_atom::value);
}

/// WEAVE §5.3: a worker silent too long is dead; its job fails alone, its group goes on. A sweep
/// that runs late says the service itself stood still (starved, stopped, swapped): the frames of
/// that time may still be queued unread, so that time counts for no session.
void sweep(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  if (auto late = now - st.sweep_due; late > std::chrono::milliseconds{st.config.heartbeat_ms}) {
    spdlog::warn("event=gateway_stalled late_ms={}",
                 std::chrono::duration_cast<std::chrono::milliseconds>(late).count());
    st.sessions.excuse(late, now);
  }
  for (auto& [worker, s] : st.sessions.expire(now, alive_limit(st.config))) {
    spdlog::warn("event=worker_dead worker={} role={} job={} silent_ms={}", worker, s.role,
                 s.job,
                 std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_seen).count());
    st.metrics->workers_dead().Increment();
    peer_gone(self, worker, s, "its session went silent");
    if (runs_job(s.role))
      self->request(st.scheduler, caf::infinite, fail_atom::value, s.job,
                    fmt::format("worker {} stopped sending heartbeats", worker))
        .then([](ok_atom) {}, [](caf::error&) {});
  }
  update_alive(self);
  // Budgets of connections whose sessions ended go (a new session starts with a full one).
  st.session_limiter.retain([&](const std::string& identity) {
    return st.sessions.worker_of(identity) != nullptr;
  });
  next_sweep(self);
}

/// The service is going away: waiting requests are answered and every session is told, so
/// that workers register again with the next service.
ok_atom stopping(self_ptr self) {
  auto& st = self->state;
  st.stopping = true;
  for (auto& w : st.grants.drop_all())
    send_error(self, w.identity, w.request_id, v1::ERROR_STOPPING,
               "the service is stopping: register again with the next one");
  auto sessions = st.sessions.identities();
  for (auto& identity : sessions) {
    v1::Envelope e;
    e.mutable_service_stopping()->set_reason("the service is stopping");
    send_frame(self, identity, e);
  }
  spdlog::info("event=gateway_stopping sessions={}", sessions.size());
  return ok_atom::value;
}

} // namespace

gateway_actor::behavior_type gateway(gateway_actor::stateful_pointer<gateway_state> self,
                                     gateway_config config, std::shared_ptr<zmq_server> server,
                                     std::shared_ptr<service_metrics> metrics) {
  auto& st = self->state;
  st.config = config;
  st.server = std::move(server);
  st.metrics = std::move(metrics);
  st.limiter = rate_limiter{double(config.frames_per_s_per_key),
                            2.0 * config.frames_per_s_per_key};
  st.session_limiter = rate_limiter{double(config.frames_per_s_per_session),
                                    2.0 * config.frames_per_s_per_session};
  next_sweep(self);
  return {
    [self](connect_atom, cluster_scheduler_actor scheduler, fabric_controller_actor fabric) {
      self->state.scheduler = std::move(scheduler);
      self->state.fabric = std::move(fabric);
    },
    [self](connect_atom, const std::string& name, gen_controller_actor controller) {
      self->state.deployments[name] = std::move(controller);
    },
    [self](frame_atom, const std::vector<wire_frame>& frames) {
      for (auto& frame : frames) {
        handle_frame(self, frame);
        if (self->state.server)
          self->state.server->handled(frame.payload.size());
      }
    },
    [self](sweep_atom) { sweep(self); },
    [self](stopping_atom) { return stopping(self); },
    // worker_actor: the executors' side.
    [self](join_atom, const member_joined& m) { job_joined(self, m); },
    [self](run_atom, const phase_grant& g) { permit(self, g); },
    [self](resize_atom, const gpu_resize& r) {
      command_job(self, r.job, [&](v1::Envelope& e) { wire::fill(*e.mutable_tail_migration(), r); });
    },
    [self](leave_atom, const std::string& job, job_state why) { job_left(self, job, why); },
    // engine_edge_actor: the generation controllers' side.
    [self](command_atom, const std::string& deployment, const gen_command& c) {
      command_engine(self, deployment, c);
    },
    [self](step_done_atom, const step_outcome& o) { step_finished(self, o); },
    // The OCS agents' drivers (ocs_link_actor).
    [self](ocs_atom, const std::string& device, agent_driver_actor driver) {
      self->state.agents[device] = std::move(driver);
    },
    [self](ocs_atom, const std::string& identity, const ocs_request& r) {
      request_agent(self, identity, r);
    },
  };
}

} // namespace loom
