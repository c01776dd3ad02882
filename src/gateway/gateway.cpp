#include "gateway/gateway.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "loom.pb.h"
#include "scheduler/job_spec.hpp"

namespace loom {

namespace {

using self_ptr = gateway_actor::stateful_pointer<gateway_state>;
constexpr uint32_t protocol_version = 1;

std::string body_name(const v1::Envelope& e) {
  auto* field = v1::Envelope::descriptor()->FindFieldByNumber(int(e.body_case()));
  return field ? field->name() : "none";
}

void send_frame(self_ptr self, const std::string& identity, v1::Envelope& e) {
  e.set_version(protocol_version);
  if (auto* server = self->state.links->server.load())
    server->send(identity, e.SerializeAsString());
  self->state.metrics->gateway_messages("out", body_name(e)).Increment();
}

void send_error(self_ptr self, const std::string& identity, uint64_t request_id,
                v1::ErrorCode code, std::string message) {
  v1::Envelope e;
  e.set_request_id(request_id);
  e.mutable_error()->set_code(code);
  e.mutable_error()->set_message(std::move(message));
  send_frame(self, identity, e);
}

/// Answers a request with the reply `fill` builds.
template <class Fill>
void reply(self_ptr self, const std::string& identity, uint64_t request_id, Fill fill) {
  v1::Envelope e;
  e.set_request_id(request_id);
  fill(e);
  send_frame(self, identity, e);
}

std::string role_name(v1::Role r) {
  switch (r) {
    case v1::ROLE_ROLLOUT: return "rollout";
    case v1::ROLE_TRAIN: return "train";
    case v1::ROLE_GEN_INSTANCE: return "gen-instance";
    case v1::ROLE_COLLECTIVE_SHIM: return "collective-shim";
    case v1::ROLE_OCS_AGENT: return "ocs-agent";
    case v1::ROLE_ADMIN: return "admin";
    default: return "";
  }
}

std::optional<phase_kind> to_phase(v1::Phase p) {
  switch (p) {
    case v1::PHASE_ROLLOUT: return phase_kind::rollout;
    case v1::PHASE_TRAINING: return phase_kind::training;
    case v1::PHASE_SYNC: return phase_kind::sync;
    default: return std::nullopt;
  }
}

v1::Phase to_wire(phase_kind p) {
  switch (p) {
    case phase_kind::rollout: return v1::PHASE_ROLLOUT;
    case phase_kind::training: return v1::PHASE_TRAINING;
    case phase_kind::sync: return v1::PHASE_SYNC;
  }
  return v1::PHASE_UNSPECIFIED;
}

void fill_grant(v1::PhaseGrant* g, const phase_grant& p) {
  g->set_job(p.job);
  g->set_phase(to_wire(p.phase));
  g->set_gpus(uint32_t(p.gpus));
  g->set_switch_s(p.switch_s);
  g->set_cold(p.cold);
}

/// Sends a command to every live session of a job.
template <class Fill>
void command_job(self_ptr self, const std::string& job, Fill fill) {
  for (auto& [id, s] : self->state.sessions)
    if (s.job == job) {
      v1::Envelope e;
      fill(e);
      send_frame(self, s.identity, e);
    }
}

void update_alive(self_ptr self) {
  std::map<std::string, double> by_role;
  for (auto& [id, s] : self->state.sessions)
    by_role[s.role] += 1;
  for (auto role : {"rollout", "train", "gen-instance", "collective-shim", "ocs-agent", "admin"})
    self->state.metrics->workers_alive(role).Set(by_role[role]);
}

/// A wire intent as the fabric controller takes it, or why it is not one.
caf::expected<std::pair<fabric_intent, commit_window>> to_intent(const v1::FabricIntent& w) {
  std::optional<fabric_stage> stage;
  for (auto s : {fabric_stage::train_compute, fabric_stage::train_grad_sync, fabric_stage::gen,
                 fabric_stage::weight_sync})
    if (to_string(s) == w.stage())
      stage = s;
  std::optional<primitive> prim;
  for (auto p : {primitive::all_reduce, primitive::all_gather, primitive::reduce_scatter,
                 primitive::all_to_all, primitive::broadcast, primitive::send_recv, primitive::m2n})
    if (to_string(p) == w.primitive())
      prim = p;
  std::optional<window_kind> window;
  for (auto k : {window_kind::stage_boundary, window_kind::iteration_boundary,
                 window_kind::deployment_boundary, window_kind::before_broadcast,
                 window_kind::in_step})
    if (to_string(k) == w.window())
      window = k;
  if (!stage || !prim || !window || w.owner().empty() || w.bytes() < 0 || w.window_s() < 0)
    return make_error(errc::invalid_argument,
                      fmt::format("FabricIntent needs an owner, a stage (train, grad-sync, gen, "
                                  "weight-sync), a primitive, a window and non-negative sizes; "
                                  "got stage '{}', primitive '{}', window '{}'",
                                  w.stage(), w.primitive(), w.window()));
  fabric_intent intent{w.owner(), *stage, {{*prim, 1.0}}, {}, w.bytes(), w.group_size()};
  for (auto& r : w.members())
    intent.members.push_back({r.server(), int(r.gpu())});
  return std::pair{intent, commit_window{*window, w.window_s()}};
}

/// Admin requests (the loom CLI): submit, list, inspect, cancel, groups, fabric.
bool handle_admin(self_ptr self, const std::string& identity, const v1::Envelope& env) {
  auto& st = self->state;
  auto rid = env.request_id();
  auto fail = [self, identity, rid](caf::error& err) {
    send_error(self, identity, rid, v1::ERROR_INTERNAL, render(err));
  };
  switch (env.body_case()) {
    case v1::Envelope::kSubmitJob: {
      auto spec = parse_job_spec(env.submit_job().spec_toml(),
                                 env.submit_job().source().empty() ? "<submitted>"
                                                                   : env.submit_job().source(),
                                 st.config.default_slo);
      if (!spec.value) {
        std::string msg;
        for (auto& e : spec.errors)
          msg += (msg.empty() ? "" : "\n") + e.to_string();
        send_error(self, identity, rid, v1::ERROR_INVALID, msg);
        return true;
      }
      self->request(st.links->scheduler, caf::infinite, submit_atom::value, *spec.value)
        .then(
          [self, identity, rid](const placement_reply& r) {
            reply(self, identity, rid, [&](v1::Envelope& e) {
              auto* s = e.mutable_submit_reply();
              s->set_job(r.job);
              s->set_outcome(r.kind);
              s->set_group(r.group);
              s->set_reason(r.reason);
              s->set_cost_per_hour(r.cost_per_hour);
            });
          },
          fail);
      return true;
    }
    case v1::Envelope::kListJobs:
    case v1::Envelope::kInspectJob: {
      std::string only = env.body_case() == v1::Envelope::kInspectJob ? env.inspect_job().job() : "";
      self->request(st.links->scheduler, caf::infinite, jobs_atom::value)
        .then(
          [self, identity, rid, only](const std::vector<job_status>& jobs) {
            auto info = [](v1::JobInfo* j, const job_status& s) {
              j->set_job(s.job);
              j->set_state(s.state);
              j->set_group(s.group);
              j->set_slo(s.slo);
              j->set_solo_s(s.solo_s);
              j->set_reason(s.reason);
            };
            if (!only.empty()) {
              for (auto& s : jobs)
                if (s.job == only) {
                  reply(self, identity, rid, [&](v1::Envelope& e) { info(e.mutable_job_info(), s); });
                  return;
                }
              send_error(self, identity, rid, v1::ERROR_NOT_FOUND, fmt::format("no job '{}'", only));
              return;
            }
            reply(self, identity, rid, [&](v1::Envelope& e) {
              auto* list = e.mutable_job_list();
              for (auto& s : jobs)
                info(list->add_jobs(), s);
            });
          },
          fail);
      return true;
    }
    case v1::Envelope::kCancelJob: {
      auto job = env.cancel_job().job();
      self->request(st.links->scheduler, caf::infinite, cancel_atom::value, job)
        .then([self, identity, rid](ok_atom) {
                reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
              },
              [self, identity, rid](caf::error& err) {
                send_error(self, identity, rid, v1::ERROR_NOT_FOUND, render(err));
              });
      return true;
    }
    case v1::Envelope::kListGroups:
      self->request(st.links->scheduler, caf::infinite, groups_atom::value)
        .then(
          [self, identity, rid](const std::vector<group_status>& groups) {
            reply(self, identity, rid, [&](v1::Envelope& e) {
              auto* list = e.mutable_group_list();
              for (auto& g : groups) {
                auto* x = list->add_groups();
                x->set_group(g.group);
                for (auto& j : g.jobs)
                  x->add_jobs(j);
                for (auto& n : g.rollout_nodes)
                  x->add_rollout_nodes(n);
                for (auto& n : g.training_nodes)
                  x->add_training_nodes(n);
                x->set_saturated(g.saturated);
                x->set_cost_per_hour(g.cost_per_hour);
              }
            });
          },
          fail);
      return true;
    case v1::Envelope::kListFabric:
      if (!st.links->fabric) {
        send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
        return true;
      }
      self->request(st.links->fabric, caf::infinite, plans_atom::value)
        .then(
          [self, identity, rid](const std::vector<fabric_plan_status>& plans) {
            reply(self, identity, rid, [&](v1::Envelope& e) {
              auto* list = e.mutable_fabric_plans();
              for (auto& p : plans) {
                auto* x = list->add_plans();
                x->set_owner(p.owner);
                x->set_stage(p.stage);
                x->set_version(p.version);
                x->set_circuits(p.circuits);
                for (auto& d : p.devices)
                  x->add_devices(d);
              }
            });
          },
          fail);
      return true;
    default:
      return false;
  }
}

/// Worker traffic of a registered session.
void handle_worker(self_ptr self, const std::string& identity, gateway_state::session& s,
                   const v1::Envelope& env) {
  auto& st = self->state;
  auto rid = env.request_id();
  switch (env.body_case()) {
    case v1::Envelope::kHeartbeat:
      return;
    case v1::Envelope::kPhaseAcquire: {
      auto& a = env.phase_acquire();
      auto phase = to_phase(a.phase());
      if (!phase || a.job().empty()) {
        send_error(self, identity, rid, v1::ERROR_INVALID, "PhaseAcquire needs a job and a phase");
        return;
      }
      auto key = std::make_pair(a.job(), int(*phase));
      if (auto g = st.granted.find(key); g != st.granted.end()) {
        reply(self, identity, rid, [&](v1::Envelope& e) { fill_grant(e.mutable_phase_grant(), g->second); });
        st.metrics->grant_latency().Observe(0);
        st.granted.erase(g);
        return;
      }
      st.acquiring[key].push_back({identity, rid, self->clock().now()});
      return;
    }
    case v1::Envelope::kPhaseRelease: {
      auto& r = env.phase_release();
      auto phase = to_phase(r.phase());
      if (!phase || r.job().empty() || r.solo_s() < 0) {
        send_error(self, identity, rid, v1::ERROR_INVALID,
                   "PhaseRelease needs a job, a phase and solo_s >= 0");
        return;
      }
      if (*phase == phase_kind::rollout)
        st.tail_sent.erase(r.job());
      self->send(st.links->scheduler, done_atom::value, r.job(), *phase, r.solo_s());
      reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
      return;
    }
    case v1::Envelope::kProgress: {
      auto& p = env.progress();
      if (p.responses_total() > 0
          && double(p.responses_done()) >= st.config.tail_threshold * p.responses_total()
          && st.tail_sent.insert(p.job()).second)
        self->send(st.links->scheduler, tail_atom::value, p.job());
      return;
    }
    case v1::Envelope::kGoodbye:
      spdlog::info("event=worker_goodbye worker={} job={} finished={} reason=\"{}\"",
                   st.worker_of[identity], s.job, env.goodbye().job_finished(),
                   env.goodbye().reason());
      if (env.goodbye().job_finished() && !s.job.empty())
        self->request(st.links->scheduler, caf::infinite, finish_atom::value, s.job)
          .then([](ok_atom) {}, [](caf::error&) {});
      st.sessions.erase(st.worker_of[identity]);
      st.worker_of.erase(identity);
      update_alive(self);
      return;
    case v1::Envelope::kTopoWrite: {
      if (!st.links->fabric) {
        send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
        return;
      }
      auto& w = env.topo_write();
      topo_write tw{w.group(), w.op_index(), int(w.group_size()), int(w.stage()),
                    uint8_t(w.digit())};
      self->request(st.links->fabric, caf::infinite, topo_write_atom::value, w.job(), tw)
        .then(
          [self, identity, rid](const topo_ack& a) {
            reply(self, identity, rid, [&](v1::Envelope& e) {
              e.mutable_topo_ack()->set_topo(a.topo);
              e.mutable_topo_ack()->set_fallback(a.fallback);
            });
          },
          [self, identity, rid](caf::error& err) {
            send_error(self, identity, rid, v1::ERROR_INVALID, render(err));
          });
      return;
    }
    case v1::Envelope::kFabricIntent: {
      if (!st.links->fabric) {
        send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
        return;
      }
      auto intent = to_intent(env.fabric_intent());
      if (!intent) {
        send_error(self, identity, rid, v1::ERROR_INVALID, render(intent.error()));
        return;
      }
      self->request(st.links->fabric, caf::infinite, intent_atom::value, intent->first,
                    intent->second)
        .then(
          [self, identity, rid](const fabric_decision& d) {
            reply(self, identity, rid, [&](v1::Envelope& e) {
              auto* x = e.mutable_fabric_decision();
              x->set_owner(d.owner);
              x->set_outcome(d.outcome);
              x->set_reason(d.reason);
              x->set_version(d.version);
              x->set_circuits(d.circuits);
              x->set_changed(d.changed);
              x->set_reconfig_s(d.reconfig_s);
              x->set_exposed_s(d.exposed_s);
            });
          },
          [self, identity, rid](caf::error& err) {
            send_error(self, identity, rid, v1::ERROR_INVALID, render(err));
          });
      return;
    }
    case v1::Envelope::kGenStats:
    case v1::Envelope::kCommandAck:
      send_error(self, identity, rid, v1::ERROR_UNAVAILABLE,
                 fmt::format("{} is not served live yet", body_name(env)));
      return;
    default:
      send_error(self, identity, rid, v1::ERROR_FORBIDDEN,
                 fmt::format("a {} session may not send {}", s.role, body_name(env)));
  }
}

void handle_frame(self_ptr self, const std::string& identity, const std::string& payload,
                  const std::string& authenticated) {
  auto& st = self->state;
  v1::Envelope env;
  if (!env.ParseFromString(payload) || env.body_case() == v1::Envelope::BODY_NOT_SET) {
    st.metrics->gateway_messages("in", "malformed").Increment();
    send_error(self, identity, env.request_id(), v1::ERROR_MALFORMED,
               "the frame is not a loom.v1.Envelope with a body");
    return;
  }
  st.metrics->gateway_messages("in", body_name(env)).Increment();
  if (env.version() != protocol_version) {
    send_error(self, identity, env.request_id(), v1::ERROR_UNSUPPORTED_VERSION,
               fmt::format("protocol version {} is not supported; this gateway speaks {}",
                           env.version(), protocol_version));
    return;
  }
  auto now = self->clock().now();
  if (env.body_case() == v1::Envelope::kRegister) {
    auto& r = env.register_();
    auto role = role_name(r.role());
    if (role.empty() || r.worker_id().empty()) {
      send_error(self, identity, env.request_id(), v1::ERROR_INVALID,
                 "Register needs a role and a worker_id");
      return;
    }
    if (!st.config.insecure && role != authenticated) {
      send_error(self, identity, env.request_id(), v1::ERROR_FORBIDDEN,
                 fmt::format("this key is registered for role '{}', not '{}'", authenticated, role));
      return;
    }
    auto it = st.sessions.find(r.worker_id());
    bool resumed = it != st.sessions.end();
    if (resumed)
      st.worker_of.erase(it->second.identity);
    st.sessions[r.worker_id()] = {identity, role, r.node(), r.job(), now};
    st.worker_of[identity] = r.worker_id();
    update_alive(self);
    spdlog::info("event=worker_registered worker={} role={} job={} node={} resumed={}",
                 r.worker_id(), role, r.job(), r.node(), resumed);
    reply(self, identity, env.request_id(), [&](v1::Envelope& e) {
      auto* x = e.mutable_registered();
      x->set_session(r.worker_id());
      x->set_heartbeat_ms(st.config.heartbeat_ms);
      x->set_resumed(resumed);
    });
    return;
  }
  // Admin requests need an admin key, not a session: the CLI connects for one request.
  if (st.config.insecure || authenticated == "admin")
    if (handle_admin(self, identity, env))
      return;
  auto w = st.worker_of.find(identity);
  if (w == st.worker_of.end()) {
    send_error(self, identity, env.request_id(), v1::ERROR_NOT_REGISTERED,
               fmt::format("send Register before {}", body_name(env)));
    return;
  }
  auto& s = st.sessions.at(w->second);
  s.last_seen = now;
  handle_worker(self, identity, s, env);
}

} // namespace

gateway_actor::behavior_type gateway(gateway_actor::stateful_pointer<gateway_state> self,
                                     gateway_config config, std::shared_ptr<gateway_links> links,
                                     std::shared_ptr<service_metrics> metrics) {
  auto& st = self->state;
  st.config = config;
  st.links = std::move(links);
  st.metrics = std::move(metrics);
  self->delayed_send(self, std::chrono::milliseconds{config.heartbeat_ms}, sweep_atom::value);
  return {
    [self](frame_atom, const std::string& identity, const std::string& payload,
           const std::string& role) { handle_frame(self, identity, payload, role); },
    [self](sweep_atom) {
      auto& st = self->state;
      auto limit = std::chrono::milliseconds{st.config.heartbeat_ms * st.config.heartbeat_misses};
      auto now = self->clock().now();
      for (auto it = st.sessions.begin(); it != st.sessions.end();) {
        auto& s = it->second;
        if (now - s.last_seen <= limit || s.role == "admin") {
          ++it;
          continue;
        }
        // WEAVE §5.3: the dead worker's job fails alone; its group's other jobs go on.
        spdlog::warn("event=worker_dead worker={} role={} job={} silent_ms={}", it->first, s.role,
                     s.job, std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_seen).count());
        st.metrics->workers_dead().Increment();
        if (!s.job.empty() && (s.role == "rollout" || s.role == "train"))
          self->request(st.links->scheduler, caf::infinite, fail_atom::value, s.job,
                        fmt::format("worker {} stopped sending heartbeats", it->first))
            .then([](ok_atom) {}, [](caf::error&) {});
        st.worker_of.erase(s.identity);
        it = st.sessions.erase(it);
      }
      update_alive(self);
      self->delayed_send(self, std::chrono::milliseconds{st.config.heartbeat_ms},
                         sweep_atom::value);
    },
    // worker_actor: the executors' run permits and commands.
    [self](run_atom, const phase_grant& g) {
      auto& st = self->state;
      spdlog::info("event=phase_granted job={} phase={} gpus={} switch_s={:.2f} cold={}", g.job,
                   to_string(g.phase), g.gpus, g.switch_s, g.cold);
      auto key = std::make_pair(g.job, int(g.phase));
      auto it = st.acquiring.find(key);
      if (it == st.acquiring.end() || it->second.empty()) {
        st.granted[key] = g;
        return;
      }
      for (auto& w : it->second) {
        st.metrics->grant_latency().Observe(
          std::chrono::duration<double>(self->clock().now() - w.since).count());
        reply(self, w.identity, w.request_id, [&](v1::Envelope& e) { fill_grant(e.mutable_phase_grant(), g); });
      }
      st.acquiring.erase(it);
    },
    [self](resize_atom, const std::string& job, int gpus) {
      command_job(self, job, [&](v1::Envelope& e) {
        e.mutable_tail_migration()->set_job(job);
        e.mutable_tail_migration()->set_gpus(uint32_t(gpus));
      });
    },
    [self](leave_atom, const std::string& job) {
      auto& st = self->state;
      for (auto it = st.acquiring.begin(); it != st.acquiring.end();)
        it = it->first.first == job ? st.acquiring.erase(it) : std::next(it);
      for (auto it = st.granted.begin(); it != st.granted.end();)
        it = it->first.first == job ? st.granted.erase(it) : std::next(it);
      command_job(self, job, [&](v1::Envelope& e) {
        e.mutable_job_left()->set_job(job);
        e.mutable_job_left()->set_reason("the job left its group");
      });
    },
  };
}

} // namespace loom
