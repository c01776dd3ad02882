#include "records/gen_codecs.hpp"

#include <fmt/format.h>

#include "loom.pb.h"
#include "records/gen_proto.hpp"

namespace loom {

namespace {

v1::GenPendingCommand encode_command(const pending_command& p) {
  v1::GenPendingCommand out;
  out.set_attempts(uint32_t(p.attempts));
  out.set_engine(p.command.engine);
  v1::Envelope e;
  fill_command(e, p.command, "");
  if (e.has_reconfigure())
    *out.mutable_reconfigure() = e.reconfigure();
  else if (e.has_admit_requests())
    *out.mutable_admit_requests() = e.admit_requests();
  else
    *out.mutable_migrate_requests() = e.migrate_requests();
  return out;
}

std::optional<pending_command> decode_command(const v1::GenPendingCommand& p) {
  v1::Envelope e;
  if (p.has_reconfigure())
    *e.mutable_reconfigure() = p.reconfigure();
  else if (p.has_admit_requests())
    *e.mutable_admit_requests() = p.admit_requests();
  else if (p.has_migrate_requests())
    *e.mutable_migrate_requests() = p.migrate_requests();
  auto c = command_of(e, p.engine());
  if (!c)
    return std::nullopt;
  return pending_command{std::move(*c), int(p.attempts())};
}

v1::ReconfigurePhase to_proto(reconfig_phase p) {
  switch (p) {
    case reconfig_phase::none: return v1::RECONFIGURE_PHASE_UNSPECIFIED;
    case reconfig_phase::draining: return v1::RECONFIGURE_PHASE_DRAIN;
    case reconfig_phase::resharding: return v1::RECONFIGURE_PHASE_RESHARD;
    case reconfig_phase::admitting: return v1::RECONFIGURE_PHASE_ADMIT;
  }
  return v1::RECONFIGURE_PHASE_UNSPECIFIED;
}

reconfig_phase from_proto(v1::ReconfigurePhase p) {
  switch (p) {
    case v1::RECONFIGURE_PHASE_DRAIN: return reconfig_phase::draining;
    case v1::RECONFIGURE_PHASE_RESHARD: return reconfig_phase::resharding;
    case v1::RECONFIGURE_PHASE_ADMIT: return reconfig_phase::admitting;
    default: return reconfig_phase::none;
  }
}

} // namespace

std::string encode_gen_deployment(const std::string& name, const deployment_record& r) {
  v1::GenDeployment m;
  m.set_deployment(name);
  m.set_epoch(r.epoch);
  *m.mutable_config() = loom::to_proto(r.config);
  for (auto& s : r.instances)
    fill(*m.add_instances(), s);
  m.set_next_instance(r.next_instance);
  for (auto& e : r.engines) {
    auto* x = m.add_engines();
    x->set_engine(e.engine);
    x->set_node(e.node);
    x->set_gpus(uint32_t(e.gpus));
    x->set_data_address(e.data_address);
  }
  m.set_step(r.step);
  m.set_step_active(r.step_active);
  m.set_any_done(r.any_done);
  m.set_last_done_step(r.last_done_step);
  m.set_last_done_at_ns(r.last_done_at_ns);
  m.set_last_done_requests(r.last_done_requests);
  m.set_last_done_aborted(r.last_done_aborted);
  m.set_next_command(r.next_command);
  for (auto& c : r.commands)
    *m.add_commands() = encode_command(c);
  m.set_phase(to_proto(r.phase));
  m.set_reconfig_from(r.reconfig_from);
  for (auto& [request, instance] : r.assignment) {
    auto* a = m.add_assignment();
    a->set_request(request);
    a->set_instance(instance);
  }
  for (auto& h : r.held)
    fill(*m.add_held(), h);
  *m.mutable_counters() = loom::to_proto(r.counters);
  for (auto& line : r.recent)
    m.add_recent(line);
  return m.SerializeAsString();
}

std::optional<deployment_record> decode_gen_deployment(std::string_view bytes) {
  v1::GenDeployment m;
  if (!m.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  deployment_record r;
  r.epoch = m.epoch();
  r.config = loom::from_proto(m.config());
  for (auto& s : m.instances())
    r.instances.push_back(slot_of(s, r.config));
  r.next_instance = m.next_instance();
  for (auto& e : m.engines())
    r.engines.push_back({e.engine(), e.node(), int(e.gpus()), false, e.data_address()});
  r.step = m.step();
  r.step_active = m.step_active();
  r.any_done = m.any_done();
  r.last_done_step = m.last_done_step();
  r.last_done_at_ns = m.last_done_at_ns();
  r.last_done_requests = m.last_done_requests();
  r.last_done_aborted = m.last_done_aborted();
  r.next_command = m.next_command();
  for (auto& c : m.commands())
    if (auto p = decode_command(c))
      r.commands.push_back(std::move(*p));
  r.phase = from_proto(m.phase());
  r.reconfig_from = m.reconfig_from();
  for (auto& a : m.assignment())
    r.assignment.emplace_back(a.request(), a.instance());
  for (auto& h : m.held())
    r.held.push_back(admitted_of(h));
  r.counters = loom::from_proto(m.counters());
  r.recent.assign(m.recent().begin(), m.recent().end());
  return r;
}

std::string gen_step_key(const std::string& deployment, uint64_t step) {
  return fmt::format("{}/{:016x}", deployment, step);
}

std::string gen_finished_key(const std::string& deployment, uint64_t step, uint64_t request) {
  return fmt::format("{}/{:016x}", gen_step_key(deployment, step), request);
}

std::string encode_gen_step(const std::string& deployment, const step_record& s) {
  v1::GenStep m;
  m.set_deployment(deployment);
  m.set_step(s.step);
  m.set_data_address(s.data_address);
  for (auto& p : s.requests) {
    auto* r = m.add_requests();
    r->set_request(p.id);
    r->set_prompt_tokens(p.prompt_tokens);
  }
  return m.SerializeAsString();
}

std::optional<step_record> decode_gen_step(std::string_view bytes) {
  v1::GenStep m;
  if (!m.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  step_record s;
  s.step = m.step();
  s.data_address = m.data_address();
  for (auto& r : m.requests())
    s.requests.push_back({r.request(), r.prompt_tokens(), 0, -1});
  return s;
}

std::string encode_request_done(const request_done& d) {
  v1::RequestDone m;
  fill(m, d);
  return m.SerializeAsString();
}

std::optional<request_done> decode_request_done(std::string_view bytes) {
  v1::RequestDone m;
  if (!m.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  return done_of(m);
}

std::string encode_gen_forecast(const gen_forecast& f) {
  v1::GenForecast m;
  for (auto& h : f.history) {
    auto* s = m.add_history();
    for (auto x : h)
      s->add_share(x);
  }
  for (auto x : f.plan_errors)
    m.add_plan_error(x);
  return m.SerializeAsString();
}

std::optional<gen_forecast> decode_gen_forecast(std::string_view bytes) {
  v1::GenForecast m;
  if (!m.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  gen_forecast out;
  for (auto& s : m.history())
    out.history.emplace_back(s.share().begin(), s.share().end());
  out.plan_errors.assign(m.plan_error().begin(), m.plan_error().end());
  return out;
}

} // namespace loom
