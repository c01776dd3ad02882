// The gateway's generation traffic (OrchestrRL §4 live): engines (gen-instance sessions)
// register with their deployment's controller, report every instance's load each tick,
// report finished requests (answered once durable) and answer commands; routers (gen-router
// sessions) start steps and hear when a step is done. As the controllers' engine edge the
// gateway hands commands to the engine sessions they name.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/gateway_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/gen_proto.hpp"

namespace loom::gateway_steps {

namespace {

std::string known_deployments(self_ptr self) {
  std::string out;
  for (auto& [name, c] : self->state.deployments)
    out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

/// The controller of a session's deployment, or null (after answering why).
gen_controller_actor controller_of(self_ptr self, const std::string& identity, uint64_t rid,
                                   const session& s, worker_role role, const v1::Envelope& env,
                                   const std::string& named) {
  if (s.role != role) {
    send_error(self, identity, rid, v1::ERROR_FORBIDDEN,
               fmt::format("a {} session may not send {}", s.role, wire::body_name(env)));
    return {};
  }
  if (!named.empty() && named != s.deployment) {
    send_error(self, identity, rid, v1::ERROR_FORBIDDEN,
               fmt::format("this session serves deployment '{}', not '{}'", s.deployment, named));
    return {};
  }
  auto it = self->state.deployments.find(s.deployment);
  if (it == self->state.deployments.end()) {
    send_error(self, identity, rid, v1::ERROR_UNAVAILABLE,
               fmt::format("deployment '{}' is not served", s.deployment));
    return {};
  }
  return it->second;
}

const std::string& worker_of(self_ptr self, const std::string& identity) {
  static const std::string none;
  auto* w = self->state.sessions.worker_of(identity);
  return w ? *w : none;
}

void finished(self_ptr self, const std::string& identity, uint64_t rid,
              const gen_controller_actor& ctl, const v1::RequestsFinished& m) {
  requests_finished f;
  f.engine = worker_of(self, identity);
  f.step = m.step();
  for (auto& d : m.requests()) {
    if (d.output_tokens() < 0) {
      send_error(self, identity, rid, v1::ERROR_INVALID,
                 fmt::format("request {}: output_tokens must not be negative", d.request()));
      return;
    }
    f.done.push_back(done_of(d));
  }
  self->request(ctl, caf::infinite, finished_atom::value, std::move(f))
    .then([self, identity, rid](ok_atom) {
            reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
          },
          [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

void step_start(self_ptr self, const std::string& identity, uint64_t rid,
                const gen_controller_actor& ctl, const v1::StepStart& m) {
  if (m.requests().empty()) {
    send_error(self, identity, rid, v1::ERROR_INVALID, "StepStart needs the step's requests");
    return;
  }
  step_batch b;
  b.step = m.step();
  b.data_address = m.data_address();
  for (auto& r : m.requests()) {
    if (r.prompt_tokens() < 0) {
      send_error(self, identity, rid, v1::ERROR_INVALID,
                 fmt::format("request {}: prompt_tokens must not be negative", r.request()));
      return;
    }
    b.requests.push_back({r.request(), r.prompt_tokens(), 0, -1});
  }
  self->request(ctl, caf::infinite, step_atom::value, std::move(b))
    .then(
      [self, identity, rid](const step_placement& p) {
        reply(self, identity, rid,
              [&](v1::Envelope& e) { wire::fill(*e.mutable_step_placed(), p); });
      },
      [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

void send_step_done(self_ptr self, const std::string& identity, const step_outcome& o) {
  v1::Envelope e;
  wire::fill(*e.mutable_step_done(), o);
  send_frame(self, identity, e);
}

} // namespace

std::optional<admission> deployment_admission(self_ptr self, const std::string& identity,
                                              uint64_t rid, const v1::Register& r,
                                              const session& s) {
  const auto& worker_id = r.worker_id();
  int gpus = int(r.gpus());
  auto it = self->state.deployments.find(s.deployment);
  if (it == self->state.deployments.end()) {
    send_error(self, identity, rid, v1::ERROR_NOT_FOUND,
               fmt::format("no generation deployment '{}' (this service runs: {})",
                           s.deployment, known_deployments(self)));
    return std::nullopt;
  }
  if (s.role == worker_role::gen_router)
    return admission{[self, controller = it->second, identity](auto done) {
      done(caf::error{});
      // A StepDone goes out once, to the routers registered then: one that was away (the
      // service restarted, its session lapsed) hears the last one after its Registered.
      self->request(controller, caf::infinite, step_done_atom::value)
        .then([self, identity](const step_outcome& o) { send_step_done(self, identity, o); },
              [](caf::error&) {});
    }};
  if (gpus <= 0) {
    send_error(self, identity, rid, v1::ERROR_INVALID, "an engine registers with its gpus");
    return std::nullopt;
  }
  // A new process under the id of a session that went silent: what that one ran is gone.
  auto* old = self->state.sessions.find(worker_id);
  engine_hello h{worker_id, s.node, gpus, old && old->incarnation != s.incarnation,
                 r.data_address()};
  return admission{[self, controller = it->second, h](auto done) {
    self->request(controller, caf::infinite, engine_atom::value, h)
      .then([done](ok_atom) { done(caf::error{}); }, [done](caf::error& err) { done(err); });
  }};
}

bool handle_generation(self_ptr self, const std::string& identity, const session& s,
                       const v1::Envelope& env) {
  auto rid = env.request_id();
  switch (env.body_case()) {
    case v1::Envelope::kGenStats:
      if (auto ctl = controller_of(self, identity, rid, s, worker_role::gen_instance, env,
                                   env.gen_stats().deployment()))
        self->send(ctl, stats_atom::value, stats_of(env.gen_stats(), worker_of(self, identity)));
      return true;
    case v1::Envelope::kRequestsFinished:
      if (auto ctl = controller_of(self, identity, rid, s, worker_role::gen_instance, env,
                                   env.requests_finished().deployment()))
        finished(self, identity, rid, ctl, env.requests_finished());
      return true;
    case v1::Envelope::kCommandAck:
      if (auto ctl = controller_of(self, identity, rid, s, worker_role::gen_instance, env,
                                   env.command_ack().deployment()))
        self->send(ctl, ack_atom::value, ack_of(env.command_ack(), worker_of(self, identity)));
      return true;
    case v1::Envelope::kStepStart:
      if (auto ctl = controller_of(self, identity, rid, s, worker_role::gen_router, env,
                                   env.step_start().deployment()))
        step_start(self, identity, rid, ctl, env.step_start());
      return true;
    default: return false;
  }
}

void engine_gone(self_ptr self, const std::string& worker_id, const session& s,
                 const std::string& why) {
  if (s.role != worker_role::gen_instance)
    return;
  if (auto it = self->state.deployments.find(s.deployment); it != self->state.deployments.end())
    self->send(it->second, lost_atom::value, worker_id, why);
}

void command_engine(self_ptr self, const std::string& deployment, const gen_command& c) {
  auto* s = self->state.sessions.find(c.engine);
  if (!s || s->role != worker_role::gen_instance || s->deployment != deployment) {
    spdlog::debug("event=gen_command_undeliverable deployment={} engine={} command={}",
                  deployment, c.engine, c.id);
    return; // its deadline tells the controller
  }
  v1::Envelope e;
  fill_command(e, c, deployment);
  send_frame(self, s->identity, e);
}

void step_finished(self_ptr self, const step_outcome& o) {
  for (auto& identity : self->state.sessions.identities_of(o.deployment, worker_role::gen_router))
    send_step_done(self, identity, o);
}

namespace {

/// The controller of an admin request's deployment; nothing, after answering NOT_FOUND, when
/// the service runs none of that name.
std::optional<gen_controller_actor> controller_named(self_ptr self, const std::string& identity,
                                                     uint64_t rid, const std::string& name) {
  auto it = self->state.deployments.find(name);
  if (it != self->state.deployments.end())
    return it->second;
  send_error(self, identity, rid, v1::ERROR_NOT_FOUND,
             fmt::format("no generation deployment '{}'", name));
  return std::nullopt;
}

} // namespace

void abort_step(self_ptr self, const std::string& identity, uint64_t rid,
                const v1::AbortStep& m) {
  auto ctl = controller_named(self, identity, rid, m.deployment());
  if (!ctl)
    return;
  auto why = m.reason().empty() ? std::string{"aborted by an operator"}
                                : "aborted by an operator: " + m.reason();
  self->request(*ctl, caf::infinite, cancel_atom::value, std::move(why))
    .then(
      [self, identity, rid](const step_outcome& o) {
        reply(self, identity, rid, [&](v1::Envelope& e) { wire::fill(*e.mutable_step_done(), o); });
      },
      [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

void set_layout(self_ptr self, const std::string& identity, uint64_t rid,
                const v1::SetLayout& m) {
  auto ctl = controller_named(self, identity, rid, m.deployment());
  if (!ctl)
    return;
  auto layout = parallel_config::parse(m.layout());
  if (!layout) {
    send_error(self, identity, rid, v1::ERROR_INVALID,
               fmt::format("'{}' is not a parallel config (e.g. TP2, EP8/TP2, AFD4:4)",
                           m.layout()));
    return;
  }
  self->request(*ctl, caf::infinite, plan_atom::value, *layout)
    .then(
      [self, identity, rid](ok_atom) {
        reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
      },
      [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

void list_generation(self_ptr self, const std::string& identity, uint64_t rid) {
  auto& deployments = self->state.deployments;
  if (deployments.empty()) {
    reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_generation_list(); });
    return;
  }
  auto results = std::make_shared<std::vector<gen_status>>(deployments.size());
  auto left = std::make_shared<size_t>(deployments.size());
  size_t i = 0;
  for (auto& [name, ctl] : deployments) {
    self->request(ctl, caf::infinite, status_atom::value)
      .then(
        [self, identity, rid, results, left, i](const gen_status& s) {
          (*results)[i] = s;
          if (*left == 0 || --*left > 0)
            return; // another failed and was answered, or more are to come
          reply(self, identity, rid, [&](v1::Envelope& e) {
            auto* list = e.mutable_generation_list();
            for (auto& r : *results)
              wire::fill(*list->add_deployments(), r);
          });
        },
        [self, identity, rid, left](caf::error& err) {
          if (std::exchange(*left, 0) > 0)
            send_failure(self, identity, rid, err);
        });
    ++i;
  }
}

} // namespace loom::gateway_steps
