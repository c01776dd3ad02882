#include "gateway/wire.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "protocol/error.hpp"
#include "records/gen_proto.hpp"
#include "records/proto_enums.hpp"

namespace loom::wire {

std::string body_name(const v1::Envelope& e) {
  auto* field = v1::Envelope::descriptor()->FindFieldByNumber(int(e.body_case()));
  return field ? field->name() : "none";
}

// loom.v1's Role and Phase number their values as worker_role and phase_kind do, plus one.
static_assert(int(v1::ROLE_GEN_ROUTER) == int(worker_role::gen_router) + 1);
static_assert(int(v1::PHASE_SYNC) == int(phase_kind::sync) + 1);

std::optional<worker_role> role_of(v1::Role r) {
  if (r < v1::ROLE_ROLLOUT || r > v1::ROLE_GEN_ROUTER)
    return std::nullopt;
  return worker_role(int(r) - 1);
}

std::optional<phase_kind> phase_of(v1::Phase p) {
  if (p < v1::PHASE_ROLLOUT || p > v1::PHASE_SYNC)
    return std::nullopt;
  return phase_kind(int(p) - 1);
}

v1::Phase to_wire(phase_kind p) {
  return v1::Phase(int(p) + 1);
}

v1::JobState to_wire(job_state s) {
  return to_proto(s);
}

v1::ErrorCode error_code(errc code) {
  switch (code) {
    case errc::invalid_argument:
    case errc::invalid_config: return v1::ERROR_INVALID;
    case errc::not_found: return v1::ERROR_NOT_FOUND;
    case errc::job_ended: return v1::ERROR_JOB_ENDED;
    case errc::already_exists: return v1::ERROR_ALREADY_EXISTS;
    case errc::out_of_turn: return v1::ERROR_RESTART_ITERATION;
    case errc::driver_refused: return v1::ERROR_REJECTED;
    case errc::unavailable:
    case errc::driver_unreachable:
    case errc::driver_timeout: return v1::ERROR_UNAVAILABLE;
    case errc::conflict: return v1::ERROR_CONFLICT;
    case errc::not_leader: return v1::ERROR_STOPPING; // the clients go to the next leader
    case errc::storage_full:
    case errc::storage_read_only: return v1::ERROR_READ_ONLY;
    default: return v1::ERROR_INTERNAL;
  }
}

namespace {

template <class Devices>
void fill_devices(Devices& out, const std::vector<node_devices>& nodes) {
  for (auto& n : nodes) {
    auto* d = out.Add();
    d->set_node(n.node);
    for (int i : n.devices)
      d->add_devices(uint32_t(i));
  }
}

} // namespace

void fill(v1::PhaseGrant& out, const phase_grant& g) {
  out.set_job(g.job);
  out.set_phase(to_wire(g.phase));
  out.set_gpus(uint32_t(g.gpus));
  out.set_switch_s(g.switch_s);
  out.set_cold(g.cold);
  out.set_iteration(uint64_t(g.iteration));
  out.set_group(g.group);
  fill_devices(*out.mutable_devices(), g.devices);
  out.set_profiling(g.profiling);
}

void fill(v1::TailMigration& out, const gpu_resize& r) {
  out.set_job(r.job);
  out.set_gpus(uint32_t(r.gpus));
  fill_devices(*out.mutable_devices(), r.devices);
}

void fill(v1::SubmitReply& out, const placement_reply& r) {
  out.set_job(r.job);
  out.set_outcome(std::string{to_string(r.kind)});
  out.set_placement(to_proto(r.kind));
  out.set_group(r.group);
  out.set_reason(r.reason);
  out.set_cost_per_hour(r.cost_per_hour);
  out.set_group_cost_per_hour(r.group_cost_per_hour);
  for (auto& n : r.rollout_nodes)
    out.add_rollout_nodes(n);
  for (auto& n : r.training_nodes)
    out.add_training_nodes(n);
}

void fill(v1::JobInfo& out, const job_status& s) {
  out.set_job(s.job);
  out.set_state(std::string{to_string(s.state)});
  out.set_job_state(to_proto(s.state));
  out.set_group(s.group);
  out.set_slo(s.slo);
  out.set_solo_s(s.solo_s);
  out.set_reason(s.reason);
  out.set_iterations(uint64_t(std::max<int64_t>(0, s.iterations)));
  out.set_iterations_done(uint64_t(std::max<int64_t>(0, s.iterations_completed)));
}

void fill_detail(v1::JobInfo& out, const job_status& s) {
  for (auto& n : s.rollout_nodes)
    out.add_rollout_nodes(n);
  for (auto& n : s.training_nodes)
    out.add_training_nodes(n);
  if (s.state != job_state::placed)
    return;
  out.set_phase(to_wire(s.member.phase));
  out.set_running(s.member.running);
  out.set_waiting(s.member.waiting);
  out.set_overruns(uint32_t(s.member.overruns));
}

void fill(v1::GroupInfo& out, const group_status& g) {
  out.set_group(g.group);
  for (auto& j : g.jobs)
    out.add_jobs(j);
  for (auto& n : g.rollout_nodes)
    out.add_rollout_nodes(n);
  for (auto& n : g.training_nodes)
    out.add_training_nodes(n);
  out.set_saturated(g.saturated);
  out.set_cost_per_hour(g.cost_per_hour);
  for (auto n : g.iterations_done)
    out.add_iterations_done(uint64_t(n));
}

void fill(v1::FabricDecision& out, const fabric_decision& d) {
  out.set_owner(d.owner);
  out.set_outcome(std::string{to_string(d.outcome)});
  out.set_outcome_kind(to_proto(d.outcome));
  out.set_reason(d.reason);
  out.set_version(d.version);
  out.set_circuits(d.circuits);
  out.set_changed(d.changed);
  out.set_reconfig_s(d.reconfig_s);
  out.set_exposed_s(d.exposed_s);
}

void fill(v1::FabricPlanInfo& out, const fabric_plan_status& p) {
  out.set_owner(p.owner);
  out.set_stage(std::string{to_string(p.stage)});
  out.set_stage_kind(to_proto(p.stage));
  out.set_version(p.version);
  out.set_circuits(p.circuits);
  for (auto& d : p.devices)
    out.add_devices(d);
}

void fill(v1::OpusJobInfo& out, const opus_job_status& j) {
  out.set_job(j.job);
  for (auto& r : j.rails)
    out.add_rails(r);
  out.set_topo(j.topo);
  out.set_first_port(j.first_port);
  out.set_ranks(j.ranks);
  out.set_fallback(j.fallback);
}

caf::expected<std::pair<fabric_intent, commit_window>> intent_of(const v1::FabricIntent& w) {
  auto stage = read_either<fabric_stage>(w.stage_kind(), w.stage());
  auto prim = read_either<primitive>(w.primitive_kind(), w.primitive());
  auto window = read_either<window_kind>(w.window_kind(), w.window());
  if (!stage || !prim || !window || w.owner().empty() || w.bytes() < 0 || w.window_s() < 0)
    return make_error(errc::invalid_argument,
                      fmt::format("FabricIntent needs an owner, a stage ({}), a primitive ({}), "
                                  "a window ({}) and non-negative sizes; got stage '{}', "
                                  "primitive '{}', window '{}'",
                                  names_of<fabric_stage>(), names_of<primitive>(),
                                  names_of<window_kind>(), w.stage(), w.primitive(), w.window()));
  fabric_intent intent{w.owner(), *stage, {{*prim, 1.0}}, {}, w.bytes(), w.group_size()};
  for (auto& r : w.members())
    intent.members.push_back({r.server(), int(r.gpu())});
  if (w.receive_weights_size() > 0) {
    if (w.receive_weights_size() != w.members_size()
        || std::any_of(w.receive_weights().begin(), w.receive_weights().end(),
                       [](double x) { return !std::isfinite(x) || x < 0; }))
      return make_error(errc::invalid_argument,
                        fmt::format("FabricIntent of '{}': {} receive weights for {} members; "
                                    "each finite and non-negative",
                                    w.owner(), w.receive_weights_size(), w.members_size()));
    intent.receive_weights.assign(w.receive_weights().begin(), w.receive_weights().end());
  }
  intent.predicted = w.predicted();
  intent.iteration = w.iteration();
  intent.layer = w.layer();
  return std::pair{intent, commit_window{*window, w.window_s()}};
}

void fill(v1::StepPlaced& out, const step_placement& p) {
  out.set_step(p.step);
  out.set_deployment(p.deployment.name());
  out.set_reconfigured(p.reconfigured);
  out.set_done(p.done);
  out.set_last_finished_at_ns(p.last_finished_at_ns);
  for (size_t i = 0; i < p.instances.size(); ++i) {
    auto* x = out.add_placements();
    x->set_instance(p.instances[i]);
    x->set_engine(i < p.engines.size() ? p.engines[i] : "");
  }
}

void fill(v1::StepDone& out, const step_outcome& o) {
  out.set_deployment(o.deployment);
  out.set_step(o.step);
  out.set_last_finished_at_ns(o.last_finished_at_ns);
  out.set_requests(uint32_t(o.requests));
  out.set_aborted(o.aborted);
  out.set_reason(o.reason);
}

void fill(v1::GenerationInfo& out, const gen_status& s) {
  out.set_deployment(s.deployment);
  out.set_model(s.model);
  out.set_gpus(uint32_t(s.gpus));
  out.set_current(s.current.name());
  out.set_epoch(s.epoch);
  for (auto& e : s.engines)
    out.add_engines(e);
  for (auto& i : s.instances)
    loom::fill(*out.add_instances(), i);
  out.set_step(s.step);
  out.set_step_active(s.step_active);
  out.set_pending(s.pending);
  out.set_finished(s.finished);
  out.set_phase(s.phase);
  out.set_forecast_mean_tokens(s.forecast_mean_tokens);
  for (auto& r : s.recent)
    out.add_recent(r);
  *out.mutable_counters() = loom::to_proto(s.counters);
  out.set_last_solve_ms(s.last_solve_ms);
  out.set_last_forecast_error(s.last_forecast_error);
}

} // namespace loom::wire
