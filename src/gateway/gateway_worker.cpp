// The gateway's traffic from registered peers: heartbeats, the WEAVE phase shim (staged,
// acquire, release, progress), goodbyes, and the fabric's intents and Opus topo_writes. A
// session acts only on its own job and in its role's phases; fabric traffic is the collective
// shims', each for its own job.

#include <cmath>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/gateway_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/proto_enums.hpp"

namespace loom::gateway_steps {

namespace {

/// Why this session may not act on this job and phase, or empty.
std::string refusal(const session& s, const std::string& job, std::optional<phase_kind> phase) {
  if (!runs_job(s.role))
    return fmt::format("a {} session runs no job's phases", s.role);
  if (job != s.job)
    return fmt::format("this session runs job '{}', not '{}'", s.job, job);
  if (phase && !may_run(s.role, *phase))
    return fmt::format("a {} worker does not run the {} phase", s.role, *phase);
  return {};
}

/// Checks the job and phase fields and the session's right to them; false once answered.
bool admitted(self_ptr self, const std::string& identity, uint64_t rid, const session& s,
              const std::string& job, std::optional<phase_kind> phase, bool needs_phase) {
  if (job.empty() || (needs_phase && !phase)) {
    send_error(self, identity, rid, v1::ERROR_INVALID,
               needs_phase ? "needs a job and a phase (rollout, training, sync)" : "needs a job");
    return false;
  }
  if (auto why = refusal(s, job, phase); !why.empty()) {
    send_error(self, identity, rid, v1::ERROR_FORBIDDEN, why);
    return false;
  }
  return true;
}

void acquire(self_ptr self, const std::string& identity, const session& s, uint64_t rid,
             const v1::PhaseAcquire& a) {
  auto& st = self->state;
  auto phase = wire::phase_of(a.phase());
  if (!admitted(self, identity, rid, s, a.job(), phase, true))
    return;
  if (st.grants.waiting_on(identity) >= max_waiting_acquires
      || st.grants.waiting() >= max_waiting_acquires_total) {
    st.metrics->gateway_limited("acquires").Increment();
    send_error(self, identity, rid, v1::ERROR_RATE_LIMITED,
               fmt::format("{} PhaseAcquire requests of this connection (or {} in all) wait "
                           "already",
                           max_waiting_acquires, max_waiting_acquires_total));
    return;
  }
  const auto job = a.job();
  auto granted = st.grants.acquire(job, *phase, {identity, rid, self->clock().now()});
  if (granted) {
    st.metrics->grant_latency().Observe(0);
    reply(self, identity, rid,
          [&](v1::Envelope& e) { fill_grant(self, *e.mutable_phase_grant(), *granted); });
    return;
  }
  // A worker asking for a phase has the job's state staged (WEAVE §5.1 Init done).
  if (executor_of(self, job)) {
    stage(self, job);
    explain_wait(self, job, *phase, identity, rid, s.role == worker_role::driver);
    return;
  }
  when_placed(
    self, job, identity, rid, [] {},
    [self, job, p = *phase, identity, rid] {
      return self->state.grants.withdraw(job, p, identity, rid);
    });
}

/// A sync release that ended an iteration the store has counted: its answer was lost (the
/// service restarted under it) and the client sent it again. Iterations end at their sync.
bool counted(const job_status& js, const v1::PhaseRelease& r, phase_kind phase) {
  if (phase != phase_kind::sync || r.iteration() == 0)
    return false;
  if (js.state == job_state::finished)
    return true; // it finished at the end of its last iteration
  return js.state == job_state::placed && js.group == r.group()
         && int64_t(r.iteration()) <= js.member.iterations_done;
}

/// A release of a phase no executor's permit stands for: after a restart, a drift, or a
/// release sent twice. One the store already counted is acknowledged; any other phase is run
/// again from its iteration's rollout (WEAVE §5.1: a permit covers one run of a phase).
void release_unpermitted(self_ptr self, const std::string& identity, uint64_t rid,
                         const v1::PhaseRelease& r, phase_kind phase) {
  self->request(self->state.scheduler, caf::infinite, job_atom::value, r.job())
    .then(
      [self, identity, rid, r, phase](const job_status& js) {
        if (counted(js, r, phase))
          reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
        else if (js.state == job_state::placed || placed_again(js.state))
          send_error(self, identity, rid, v1::ERROR_RESTART_ITERATION,
                     fmt::format("no permit of job '{}' stands for its {} phase (the service "
                                 "restarted or placed it again): run its iteration again from "
                                 "its rollout",
                                 r.job(), phase));
        else
          send_error(self, identity, rid, v1::ERROR_JOB_ENDED,
                     fmt::format("job '{}' is {}{}", r.job(), js.state,
                                 js.reason.empty() ? "" : ": " + js.reason));
      },
      [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

void release(self_ptr self, const std::string& identity, const session& s, uint64_t rid,
             const v1::PhaseRelease& r) {
  auto phase = wire::phase_of(r.phase());
  if (!admitted(self, identity, rid, s, r.job(), phase, true))
    return;
  if (!(r.solo_s() >= 0) || !(r.host_memory_gb() >= 0) || !std::isfinite(r.solo_s())
      || !std::isfinite(r.host_memory_gb())) {
    send_error(self, identity, rid, v1::ERROR_INVALID,
               "PhaseRelease needs finite solo_s >= 0 and host_memory_gb >= 0");
    return;
  }
  const auto job = r.job();
  auto executor = executor_of(self, job);
  if (!executor || !self->state.grants.held(job, *phase)) {
    release_unpermitted(self, identity, rid, r, *phase);
    return;
  }
  self->state.grants.release(job, *phase);
  if (*phase == phase_kind::rollout)
    self->state.jobs[job].tail_sent = false;
  if (r.host_memory_gb() > 0) // before the phase's end, which may end a profiling pass
    self->send(executor, footprint_atom::value, job, *phase, r.host_memory_gb());
  self->request(executor, caf::infinite, done_atom::value, job, *phase, r.solo_s())
    .then([self, identity, rid](ok_atom) {
            reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
          },
          [self, identity, rid, r, phase = *phase](caf::error& err) {
            // The permit's executor let the job go meanwhile (consolidation moved it and
            // dissolved the group, WEAVE §4.4): the scheduler says where the job stands.
            if (code_of(err) == errc::job_ended || err == caf::sec::request_receiver_down)
              release_unpermitted(self, identity, rid, r, phase);
            else
              send_failure(self, identity, rid, err);
          });
}

void staged(self_ptr self, const std::string& identity, const session& s, uint64_t rid,
            const v1::Staged& m) {
  if (!admitted(self, identity, rid, s, m.job(), std::nullopt, false))
    return;
  auto ok = [self, identity, rid] {
    reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
  };
  if (executor_of(self, m.job())) {
    stage(self, m.job());
    ok();
    return;
  }
  // Its executor's join is on its way: its first acquire stages it.
  when_placed(self, m.job(), identity, rid, ok, [] { return true; });
}

/// WEAVE §4.3: the rollout reached the tail threshold of its responses.
void progress(self_ptr self, const session& s, const v1::Progress& p) {
  auto& st = self->state;
  if (!refusal(s, p.job(), phase_kind::rollout).empty())
    return; // one-way: nothing to answer, nothing done
  auto link = st.jobs.find(p.job());
  if (link == st.jobs.end() || !link->second.executor || p.responses_total() == 0)
    return;
  if (double(p.responses_done()) >= st.config.tail_threshold * p.responses_total()
      && !link->second.tail_sent) {
    link->second.tail_sent = true;
    self->send(link->second.executor, tail_atom::value, p.job());
  }
}

void goodbye(self_ptr self, const std::string& identity, const session& s,
             const v1::Goodbye& g) {
  auto& st = self->state;
  auto* worker = st.sessions.worker_of(identity);
  spdlog::info("event=worker_goodbye worker={} job={} finished={} reason=\"{}\"",
               worker ? *worker : "", s.job, g.job_finished(), g.reason());
  if (g.job_finished() && runs_job(s.role))
    self->request(st.scheduler, caf::infinite, finish_atom::value, s.job)
      .then([](ok_atom) {}, [](caf::error&) {});
  else if (g.job_failed() && runs_job(s.role))
    self->request(st.scheduler, caf::infinite, fail_atom::value, s.job,
                  fmt::format("worker {}: {}", worker ? *worker : "", g.reason()))
      .then([](ok_atom) {}, [](caf::error&) {});
  if (worker)
    peer_gone(self, *worker, s, fmt::format("it said goodbye: {}", g.reason()));
  st.sessions.close(identity);
  update_alive(self);
}

void topo_write_of(self_ptr self, const std::string& identity, uint64_t rid,
                   const v1::TopoWrite& w) {
  topo_write tw{w.group(), w.op_index(), int(w.group_size()), int(w.stage()), uint8_t(w.digit())};
  self->request(self->state.fabric, caf::infinite, topo_write_atom::value, w.job(), tw)
    .then(
      [self, identity, rid](const topo_ack& a) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          e.mutable_topo_ack()->set_topo(a.topo);
          e.mutable_topo_ack()->set_fallback(a.fallback);
        });
      },
      [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

/// Asks the fabric controller for a decision (an intent's, a window's) and answers with it.
template <class... Ts>
void ask_fabric(self_ptr self, const std::string& identity, uint64_t rid, Ts&&... xs) {
  self->request(self->state.fabric, caf::infinite, std::forward<Ts>(xs)...)
    .then(
      [self, identity, rid](const fabric_decision& d) {
        reply(self, identity, rid,
              [&](v1::Envelope& e) { wire::fill(*e.mutable_fabric_decision(), d); });
      },
      [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

void fabric_intent_of(self_ptr self, const std::string& identity, uint64_t rid,
                      const v1::FabricIntent& w) {
  auto intent = wire::intent_of(w);
  if (!intent) {
    send_error(self, identity, rid, v1::ERROR_INVALID, message_of(intent.error()));
    return;
  }
  ask_fabric(self, identity, rid, intent_atom::value, intent->first, intent->second);
}

/// The owner is at a window with no new intent: its standing one is tried in it (RFabric
/// Alg. 2 line 7's retry, at a window the owner names rather than at its next intent).
void fabric_window_of(self_ptr self, const std::string& identity, uint64_t rid,
                      const v1::FabricWindow& w) {
  auto kind = from_proto(w.window_kind());
  if (!kind || w.window_s() < 0) {
    send_error(self, identity, rid, v1::ERROR_INVALID,
               fmt::format("FabricWindow needs a window ({}) and a non-negative length",
                           names_of<window_kind>()));
    return;
  }
  ask_fabric(self, identity, rid, window_atom::value, w.owner(),
             commit_window{*kind, w.window_s()});
}

/// Opus §4.1: a job on photonic rails, answered once the rails carry its first topology (and,
/// with its stages' profiled traces, with the phase table, §4.2).
void opus_job_of(self_ptr self, const std::string& identity, uint64_t rid, const v1::OpusJob& w) {
  if (w.job().empty() || w.pp() < 1 || w.rails().empty()) {
    send_error(self, identity, rid, v1::ERROR_INVALID, "OpusJob needs a job, pp >= 1 and rails");
    return;
  }
  opus_job job{w.job(), int(w.pp()), {w.symmetrical().begin(), w.symmetrical().end()},
               {w.rails().begin(), w.rails().end()}, w.initial(), {}, w.first_port()};
  for (auto& t : w.traces())
    job.traces.push_back({int(t.stage()), {t.digits().begin(), t.digits().end()}});
  self->request(self->state.fabric, caf::infinite, opus_atom::value, std::move(job))
    .then(
      [self, identity, rid](const opus_registration& r) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          auto* out = e.mutable_opus_registered();
          out->set_topo(r.topo);
          out->set_first_port(r.first_port);
          for (auto& server : r.servers)
            out->add_servers(server);
          for (auto& p : r.phases) {
            auto* phase = out->add_phases();
            phase->set_stage(uint32_t(p.stage));
            phase->set_digit(uint32_t(p.digit));
            phase->set_first(p.first);
            phase->set_last(p.last);
          }
        });
      },
      [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

/// mFabric §5.1: a MoE layer's dispatch load, for the owner's traffic monitor.
void expert_load_of(self_ptr self, const std::string& identity, uint64_t rid,
                    const v1::ExpertLoad& w) {
  if (w.owner().empty() || w.tokens().empty()
      || std::any_of(w.tokens().begin(), w.tokens().end(),
                     [](double x) { return !std::isfinite(x) || x < 0; })) {
    send_error(self, identity, rid, v1::ERROR_INVALID,
               "ExpertLoad needs an owner and finite, non-negative token counts");
    return;
  }
  self->request(self->state.fabric, caf::infinite, expert_atom::value,
                expert_load{w.owner(), w.iteration(), w.layer(),
                            {w.tokens().begin(), w.tokens().end()}})
    .then([self, identity, rid](ok_atom) {
            reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
          },
          [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

/// The fabric owner (job) a shim's message concerns.
const std::string& owner_named(const v1::Envelope& env) {
  switch (env.body_case()) {
    case v1::Envelope::kTopoWrite: return env.topo_write().job();
    case v1::Envelope::kOpusJob: return env.opus_job().job();
    case v1::Envelope::kOpusJobEnd: return env.opus_job_end().job();
    case v1::Envelope::kExpertLoad: return env.expert_load().owner();
    case v1::Envelope::kFabricWindow: return env.fabric_window().owner();
    default: return env.fabric_intent().owner();
  }
}

/// Fabric traffic: the collective shims', each for the owner it registered for (a shim cannot
/// move another job's circuits or rails); without a fabric it is unavailable.
void fabric_traffic(self_ptr self, const std::string& identity, const session& s,
                    const v1::Envelope& env) {
  auto rid = env.request_id();
  if (!announces_fabric(s.role)) {
    send_error(self, identity, rid, v1::ERROR_FORBIDDEN,
               fmt::format("a {} session may not send {}", s.role, wire::body_name(env)));
    return;
  }
  if (auto owner = owner_named(env); owner != s.owner) {
    send_error(self, identity, rid, v1::ERROR_FORBIDDEN,
               fmt::format("this shim works for '{}', not '{}'", s.owner, owner));
    return;
  }
  if (!self->state.fabric) {
    send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
    return;
  }
  if (env.body_case() == v1::Envelope::kTopoWrite)
    topo_write_of(self, identity, rid, env.topo_write());
  else if (env.body_case() == v1::Envelope::kExpertLoad)
    expert_load_of(self, identity, rid, env.expert_load());
  else if (env.body_case() == v1::Envelope::kOpusJob)
    opus_job_of(self, identity, rid, env.opus_job());
  else if (env.body_case() == v1::Envelope::kOpusJobEnd)
    end_opus_job(self, identity, rid, env.opus_job_end().job());
  else if (env.body_case() == v1::Envelope::kFabricWindow)
    fabric_window_of(self, identity, rid, env.fabric_window());
  else
    fabric_intent_of(self, identity, rid, env.fabric_intent());
}

} // namespace

void end_opus_job(self_ptr self, const std::string& identity, uint64_t rid,
                  const std::string& job) {
  if (!self->state.fabric) {
    send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
    return;
  }
  self->request(self->state.fabric, caf::infinite, opus_atom::value, cancel_atom::value, job)
    .then([self, identity,
           rid](ok_atom) { reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); }); },
          [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); });
}

void handle_worker(self_ptr self, const std::string& identity, session& s,
                   const v1::Envelope& env) {
  auto rid = env.request_id();
  switch (env.body_case()) {
    case v1::Envelope::kHeartbeat: return;
    case v1::Envelope::kStaged: staged(self, identity, s, rid, env.staged()); return;
    case v1::Envelope::kPhaseAcquire: acquire(self, identity, s, rid, env.phase_acquire()); return;
    case v1::Envelope::kPhaseRelease: release(self, identity, s, rid, env.phase_release()); return;
    case v1::Envelope::kProgress: progress(self, s, env.progress()); return;
    case v1::Envelope::kGoodbye: goodbye(self, identity, s, env.goodbye()); return;
    case v1::Envelope::kTopoWrite:
    case v1::Envelope::kOpusJob:
    case v1::Envelope::kOpusJobEnd:
    case v1::Envelope::kExpertLoad:
    case v1::Envelope::kFabricWindow:
    case v1::Envelope::kFabricIntent: fabric_traffic(self, identity, s, env); return;
    default:
      if (handle_generation(self, identity, s, env) || handle_ocs(self, identity, s, env))
        return;
      send_error(self, identity, rid, v1::ERROR_FORBIDDEN,
                 fmt::format("a {} session may not send {}", s.role, wire::body_name(env)));
  }
}

} // namespace loom::gateway_steps
