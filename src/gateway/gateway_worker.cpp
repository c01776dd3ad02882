// The gateway's traffic from registered peers: heartbeats, the WEAVE phase shim (acquire,
// release, progress), goodbyes, and the fabric's intents and Opus topo_writes.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "core/inspect.hpp"
#include "gateway/gateway_steps.hpp"

namespace loom::gateway_steps {

namespace {

void acquire(self_ptr self, const std::string& identity, uint64_t rid,
             const v1::PhaseAcquire& a) {
  auto& st = self->state;
  auto phase = wire::phase_of(a.phase());
  if (!phase || a.job().empty()) {
    send_error(self, identity, rid, v1::ERROR_INVALID, "PhaseAcquire needs a job and a phase");
    return;
  }
  auto granted = st.grants.acquire(a.job(), *phase, {identity, rid, self->clock().now()});
  if (!granted)
    return; // answered when the executor permits it
  st.metrics->grant_latency().Observe(0);
  reply(self, identity, rid,
        [&](v1::Envelope& e) { wire::fill(*e.mutable_phase_grant(), *granted); });
}

/// The worker's phase report, straight to the executor that permitted the job's phase.
template <class... Ts>
void report(self_ptr self, const std::string& job, Ts... xs) {
  auto ex = self->state.executor_of.find(job);
  if (ex != self->state.executor_of.end())
    self->send(ex->second, xs...);
}

void release(self_ptr self, const std::string& identity, uint64_t rid,
             const v1::PhaseRelease& r) {
  auto phase = wire::phase_of(r.phase());
  if (!phase || r.job().empty() || r.solo_s() < 0) {
    send_error(self, identity, rid, v1::ERROR_INVALID,
               "PhaseRelease needs a job, a phase and solo_s >= 0");
    return;
  }
  if (*phase == phase_kind::rollout)
    self->state.tail_sent.erase(r.job());
  report(self, r.job(), done_atom::value, r.job(), *phase, r.solo_s());
  reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
}

/// WEAVE §4.3: the rollout reached the tail threshold of its responses.
void progress(self_ptr self, const v1::Progress& p) {
  auto& st = self->state;
  if (p.responses_total() > 0
      && double(p.responses_done()) >= st.config.tail_threshold * p.responses_total()
      && st.tail_sent.insert(p.job()).second)
    report(self, p.job(), tail_atom::value, p.job());
}

void goodbye(self_ptr self, const std::string& identity, const session& s,
             const v1::Goodbye& g) {
  auto& st = self->state;
  auto* worker = st.sessions.worker_of(identity);
  spdlog::info("event=worker_goodbye worker={} job={} finished={} reason=\"{}\"",
               worker ? *worker : "", s.job, g.job_finished(), g.reason());
  if (g.job_finished() && !s.job.empty())
    self->request(st.scheduler, caf::infinite, finish_atom::value, s.job)
      .then([](ok_atom) {}, [](caf::error&) {});
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
      [self, identity, rid](caf::error& err) {
        send_error(self, identity, rid, v1::ERROR_INVALID, render(err));
      });
}

void fabric_intent_of(self_ptr self, const std::string& identity, uint64_t rid,
                      const v1::FabricIntent& w) {
  auto intent = wire::intent_of(w);
  if (!intent) {
    send_error(self, identity, rid, v1::ERROR_INVALID, render(intent.error()));
    return;
  }
  self->request(self->state.fabric, caf::infinite, intent_atom::value, intent->first,
                intent->second)
    .then(
      [self, identity, rid](const fabric_decision& d) {
        reply(self, identity, rid,
              [&](v1::Envelope& e) { wire::fill(*e.mutable_fabric_decision(), d); });
      },
      [self, identity, rid](caf::error& err) {
        send_error(self, identity, rid, v1::ERROR_INVALID, render(err));
      });
}

/// Fabric traffic; without a fabric it is unavailable.
void fabric_traffic(self_ptr self, const std::string& identity, const v1::Envelope& env) {
  auto rid = env.request_id();
  if (!self->state.fabric) {
    send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
    return;
  }
  if (env.body_case() == v1::Envelope::kTopoWrite)
    topo_write_of(self, identity, rid, env.topo_write());
  else
    fabric_intent_of(self, identity, rid, env.fabric_intent());
}

} // namespace

void handle_worker(self_ptr self, const std::string& identity, session& s,
                   const v1::Envelope& env) {
  auto rid = env.request_id();
  switch (env.body_case()) {
    case v1::Envelope::kHeartbeat: return;
    case v1::Envelope::kPhaseAcquire: acquire(self, identity, rid, env.phase_acquire()); return;
    case v1::Envelope::kPhaseRelease: release(self, identity, rid, env.phase_release()); return;
    case v1::Envelope::kProgress: progress(self, env.progress()); return;
    case v1::Envelope::kGoodbye: goodbye(self, identity, s, env.goodbye()); return;
    case v1::Envelope::kTopoWrite:
    case v1::Envelope::kFabricIntent: fabric_traffic(self, identity, env); return;
    case v1::Envelope::kGenStats:
    case v1::Envelope::kCommandAck:
      send_error(self, identity, rid, v1::ERROR_UNAVAILABLE,
                 fmt::format("{} is not served live yet", wire::body_name(env)));
      return;
    default:
      send_error(self, identity, rid, v1::ERROR_FORBIDDEN,
                 fmt::format("a {} session may not send {}", s.role, wire::body_name(env)));
  }
}

} // namespace loom::gateway_steps
