#include "gateway/wire.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "store/proto_enums.hpp"

namespace loom::wire {

std::string body_name(const v1::Envelope& e) {
  auto* field = v1::Envelope::descriptor()->FindFieldByNumber(int(e.body_case()));
  return field ? field->name() : "none";
}

// loom.v1's Role and Phase number their values as worker_role and phase_kind do, plus one.
static_assert(int(v1::ROLE_ADMIN) == int(worker_role::admin) + 1);
static_assert(int(v1::PHASE_SYNC) == int(phase_kind::sync) + 1);

std::optional<worker_role> role_of(v1::Role r) {
  if (r < v1::ROLE_ROLLOUT || r > v1::ROLE_ADMIN)
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

void fill(v1::PhaseGrant& out, const phase_grant& g) {
  out.set_job(g.job);
  out.set_phase(to_wire(g.phase));
  out.set_gpus(uint32_t(g.gpus));
  out.set_switch_s(g.switch_s);
  out.set_cold(g.cold);
}

void fill(v1::SubmitReply& out, const placement_reply& r) {
  out.set_job(r.job);
  out.set_outcome(std::string{to_string(r.kind)});
  out.set_placement(to_proto(r.kind));
  out.set_group(r.group);
  out.set_reason(r.reason);
  out.set_cost_per_hour(r.cost_per_hour);
}

void fill(v1::JobInfo& out, const job_status& s) {
  out.set_job(s.job);
  out.set_state(std::string{to_string(s.state)});
  out.set_job_state(to_proto(s.state));
  out.set_group(s.group);
  out.set_slo(s.slo);
  out.set_solo_s(s.solo_s);
  out.set_reason(s.reason);
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
  return std::pair{intent, commit_window{*window, w.window_s()}};
}

} // namespace loom::wire
