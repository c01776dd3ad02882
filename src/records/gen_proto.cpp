#include "records/gen_proto.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

namespace loom {

namespace {

// A peer's numbers are taken only where they mean something: the service computes with them
// (a KV fraction of 1e199 once overflowed the token count, found by fuzz_envelope).
int count_of(uint32_t n) {
  return int(std::min<uint32_t>(n, INT_MAX));
}

double non_negative(double x) {
  return std::isfinite(x) && x > 0 ? x : 0;
}

} // namespace

v1::ParallelConfig to_proto(const parallel_config& c) {
  v1::ParallelConfig out;
  out.set_tp(uint32_t(c.tp));
  out.set_ep(uint32_t(c.ep));
  out.set_ffn_gpus(uint32_t(c.ffn_gpus));
  return out;
}

parallel_config from_proto(const v1::ParallelConfig& c) {
  parallel_config out{std::max(1, count_of(c.tp()))};
  out.ep = count_of(c.ep());
  out.ffn_gpus = count_of(c.ffn_gpus());
  return out;
}

void fill(v1::RequestProgress& out, const request_state& s) {
  out.set_request(s.id);
  out.set_prompt_tokens(s.prompt_tokens);
  out.set_generated(s.generated);
  out.set_running(s.running);
  out.set_kv_resident(s.kv_resident);
}

request_state state_of(const v1::RequestProgress& p) {
  return {p.request(), p.prompt_tokens(), p.generated(), p.running(), p.kv_resident()};
}

void fill(v1::GenStats& out, const instance_stats& s, const std::string& deployment) {
  out.set_deployment(deployment);
  out.set_instance(s.instance);
  out.set_epoch(s.epoch);
  uint32_t running = 0;
  for (auto& r : s.requests) {
    fill(*out.add_requests(), r);
    running += r.running ? 1 : 0;
  }
  out.set_running(running);
  out.set_queued(uint32_t(s.requests.size()) - running);
  out.set_kv_capacity_tokens(s.kv_capacity_tokens);
  out.set_kv_free(s.kv_capacity_tokens > 0 ? double(s.kv_free_tokens) / double(s.kv_capacity_tokens)
                                           : 0.0);
  out.set_max_batch(uint32_t(std::max(0, s.max_batch)));
  out.set_decode_tokens_per_s(s.decode_rate_tps);
  out.set_preemptions(uint64_t(std::max<int64_t>(0, s.preemptions)));
}

instance_stats stats_of(const v1::GenStats& m, const std::string& engine) {
  instance_stats s;
  s.engine = engine;
  s.instance = m.instance();
  s.epoch = m.epoch();
  for (auto& r : m.requests())
    s.requests.push_back(state_of(r));
  s.kv_capacity_tokens = std::max<int64_t>(0, m.kv_capacity_tokens());
  auto free = std::clamp(non_negative(m.kv_free()), 0.0, 1.0) * double(s.kv_capacity_tokens);
  s.kv_free_tokens = free >= double(s.kv_capacity_tokens) ? s.kv_capacity_tokens : int64_t(free);
  s.max_batch = count_of(m.max_batch());
  s.decode_rate_tps = non_negative(m.decode_tokens_per_s());
  s.preemptions = int64_t(std::min<uint64_t>(m.preemptions(), INT64_MAX));
  return s;
}

void fill(v1::RequestDone& out, const request_done& d) {
  out.set_request(d.id);
  out.set_output_tokens(d.output_tokens);
  out.set_finished_at_ns(d.finished_at_ns);
}

request_done done_of(const v1::RequestDone& d) {
  return {d.request(), d.output_tokens(), d.finished_at_ns()};
}

void fill(v1::AdmittedRequest& out, const admitted_request& a) {
  out.set_request(a.id);
  out.set_prompt_tokens(a.prompt_tokens);
  out.set_generated(a.generated);
  out.set_kv_transfer(a.kv_transfer);
  out.set_kv_source(a.kv_source);
  out.set_source_address(a.source_address);
}

admitted_request admitted_of(const v1::AdmittedRequest& a) {
  return {a.request(), a.prompt_tokens(), a.generated(), a.kv_transfer(), a.kv_source(),
          a.source_address()};
}

void fill(v1::InstanceSlot& out, const instance_slot& s) {
  out.set_instance(s.instance);
  for (auto& e : s.engines)
    out.add_engines(e);
  *out.mutable_config() = to_proto(s.config);
}

instance_slot slot_of(const v1::InstanceSlot& s, const parallel_config& otherwise) {
  return {s.instance(), {s.engines().begin(), s.engines().end()},
          s.has_config() ? from_proto(s.config()) : otherwise};
}

void fill_command(v1::Envelope& out, const gen_command& c, const std::string& deployment) {
  switch (c.kind) {
    case gen_command_kind::drain:
    case gen_command_kind::reshard: {
      auto* r = out.mutable_reconfigure();
      r->set_deployment(deployment);
      r->set_command(c.id);
      r->set_epoch(c.epoch);
      r->set_phase(c.kind == gen_command_kind::drain ? v1::RECONFIGURE_PHASE_DRAIN
                                                     : v1::RECONFIGURE_PHASE_RESHARD);
      r->set_tp(uint32_t(c.config.tp));
      r->set_ep(uint32_t(c.config.ep));
      r->set_ffn_gpus(uint32_t(c.config.ffn_gpus));
      r->set_instances(uint32_t(c.slots.size()));
      for (auto& s : c.slots)
        fill(*r->add_slots(), s);
      for (auto& p : c.peers) {
        auto* x = r->add_peers();
        x->set_engine(p.engine);
        x->set_gpus(uint32_t(std::max(0, p.gpus)));
        x->set_data_address(p.data_address);
      }
      return;
    }
    case gen_command_kind::admit: {
      auto* a = out.mutable_admit_requests();
      a->set_deployment(deployment);
      a->set_command(c.id);
      a->set_epoch(c.epoch);
      a->set_instance(c.instance);
      a->set_resume(c.resume);
      a->set_step(c.step);
      a->set_router_address(c.router_address);
      for (auto& r : c.requests)
        fill(*a->add_requests(), r);
      return;
    }
    case gen_command_kind::migrate: {
      auto* m = out.mutable_migrate_requests();
      m->set_deployment(deployment);
      m->set_command(c.id);
      m->set_epoch(c.epoch);
      for (auto& mv : c.moves) {
        auto* x = m->add_moves();
        x->set_request(mv.request);
        x->set_from_instance(mv.from);
        x->set_to_instance(mv.to);
      }
      return;
    }
  }
}

std::optional<gen_command> command_of(const v1::Envelope& e, const std::string& engine) {
  gen_command c;
  c.engine = engine;
  if (e.has_reconfigure()) {
    auto& r = e.reconfigure();
    if (r.phase() != v1::RECONFIGURE_PHASE_DRAIN && r.phase() != v1::RECONFIGURE_PHASE_RESHARD)
      return std::nullopt;
    c.kind = r.phase() == v1::RECONFIGURE_PHASE_DRAIN ? gen_command_kind::drain
                                                      : gen_command_kind::reshard;
    c.id = r.command();
    c.epoch = r.epoch();
    c.config = parallel_config{std::max(1, count_of(r.tp()))};
    c.config.ep = count_of(r.ep());
    c.config.ffn_gpus = count_of(r.ffn_gpus());
    for (auto& s : r.slots())
      c.slots.push_back(slot_of(s, c.config));
    for (auto& p : r.peers())
      c.peers.push_back({p.engine(), "", count_of(p.gpus()), false, p.data_address()});
    return c;
  }
  if (e.has_admit_requests()) {
    auto& a = e.admit_requests();
    c.kind = gen_command_kind::admit;
    c.id = a.command();
    c.epoch = a.epoch();
    c.instance = a.instance();
    c.resume = a.resume();
    c.step = a.step();
    c.router_address = a.router_address();
    for (auto& r : a.requests())
      c.requests.push_back(admitted_of(r));
    return c;
  }
  if (e.has_migrate_requests()) {
    auto& m = e.migrate_requests();
    c.kind = gen_command_kind::migrate;
    c.id = m.command();
    c.epoch = m.epoch();
    for (auto& mv : m.moves())
      c.moves.push_back({mv.request(), mv.from_instance(), mv.to_instance(), false});
    return c;
  }
  return std::nullopt;
}

v1::GenCounters to_proto(const gen_counters& c) {
  v1::GenCounters out;
  out.set_reconfigurations(c.reconfigurations);
  out.set_migrations(c.migrations);
  out.set_kv_transfers(c.kv_transfers);
  out.set_kv_recomputes(c.kv_recomputes);
  out.set_engines_lost(c.engines_lost);
  out.set_commands_retried(c.commands_retried);
  out.set_commands_abandoned(c.commands_abandoned);
  return out;
}

gen_counters from_proto(const v1::GenCounters& c) {
  return {c.reconfigurations(), c.migrations(),       c.kv_transfers(),      c.kv_recomputes(),
          c.engines_lost(),     c.commands_retried(), c.commands_abandoned()};
}

void fill(v1::CommandAck& out, const command_ack& a, const std::string& deployment) {
  out.set_deployment(deployment);
  out.set_command(a.command);
  out.set_ok(a.ok);
  out.set_detail(a.detail);
  out.set_elapsed_s(a.elapsed_s);
  for (auto& r : a.released)
    fill(*out.add_released(), r);
}

command_ack ack_of(const v1::CommandAck& a, const std::string& engine) {
  command_ack out;
  out.command = a.command();
  out.engine = engine;
  out.ok = a.ok();
  out.detail = a.detail();
  out.elapsed_s = non_negative(a.elapsed_s());
  for (auto& r : a.released())
    out.released.push_back(state_of(r));
  return out;
}

} // namespace loom
