#include "records/codecs.hpp"

#include <algorithm>
#include <atomic>

#include "loom.pb.h"
#include "records/proto_enums.hpp"

namespace loom {

std::string event_key(uint64_t seq) {
  std::string key(8, '\0');
  for (int i = 7; i >= 0; --i) {
    key[static_cast<size_t>(i)] = static_cast<char>(seq & 0xff);
    seq >>= 8;
  }
  return key;
}

uint64_t event_seq(std::string_view key) {
  uint64_t seq = 0;
  for (size_t i = 0; i < 8 && i < key.size(); ++i)
    seq = (seq << 8) | static_cast<unsigned char>(key[i]);
  return seq;
}

record_write ha_revision_write(int64_t revision) {
  v1::HaRevision m;
  m.set_revision(revision);
  return {record_kind::meta, std::string{ha_revision_key}, m.SerializeAsString(), false};
}

int64_t decode_ha_revision(std::string_view bytes) {
  v1::HaRevision m;
  return m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ? m.revision() : 0;
}

namespace {
std::atomic<int64_t> event_clock_offset{0};
}

void set_event_clock_offset(int64_t ns) {
  event_clock_offset.store(ns);
}

std::string encode_event(int64_t clock_ns, const loom_event& event) {
  v1::Event e;
  e.set_time_ns(clock_ns + event_clock_offset.load());
  e.set_kind(std::string{to_string(event.kind)});
  e.set_event_kind(to_proto(event.kind));
  e.set_subject(event.subject);
  e.set_detail(event.detail);
  return e.SerializeAsString();
}

std::optional<stored_event> decode_event(std::string_view bytes) {
  v1::Event e;
  if (!e.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  auto kind = read_either<event_kind>(e.event_kind(), e.kind());
  if (!kind)
    return std::nullopt;
  return stored_event{e.time_ns(), {*kind, e.subject(), e.detail()}};
}

std::string encode_job(const job_record& rec) {
  const auto& job = rec.job;
  v1::Job r;
  r.set_id(job.id);
  r.set_name(job.name);
  r.set_model(job.model);
  r.set_rollout_gpus(uint32_t(job.rollout_gpus));
  r.set_training_gpus(uint32_t(job.training_gpus));
  r.set_max_response_tokens(uint32_t(job.max_response_tokens));
  r.set_batch_size(uint32_t(job.batch_size));
  r.set_multi_turn(job.multi_turn);
  r.set_rollout_host_memory_gb(job.rollout_memory_gb);
  r.set_training_host_memory_gb(job.training_memory_gb);
  r.set_slo(job.slo);
  r.set_worst_rollout_s(job.rollout_s);
  r.set_worst_training_s(job.training_s);
  r.set_model_bytes(uint64_t(job.model_gb * 1e9));
  r.set_state(to_proto(rec.state));
  r.set_group_id(rec.group);
  r.set_reason(rec.reason);
  r.set_iterations(uint64_t(job.iterations));
  r.set_sync_s(job.sync_s);
  r.set_iterations_before(uint64_t(std::max<int64_t>(0, job.iterations_before)));
  r.set_profile(job.profile);
  r.set_iterations_done(uint64_t(std::max<int64_t>(0, rec.iterations_done)));
  return r.SerializeAsString();
}

std::optional<job_record> decode_job(std::string_view bytes) {
  v1::Job r;
  if (!r.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  auto state = from_proto(r.state());
  if (!state)
    return std::nullopt;
  job_record out;
  auto& j = out.job;
  j.id = r.id();
  j.name = r.name();
  j.model = r.model();
  j.rollout_gpus = int(r.rollout_gpus());
  j.training_gpus = int(r.training_gpus());
  j.max_response_tokens = int(r.max_response_tokens());
  j.batch_size = int(r.batch_size());
  j.multi_turn = r.multi_turn();
  j.rollout_memory_gb = r.rollout_host_memory_gb();
  j.training_memory_gb = r.training_host_memory_gb();
  j.slo = r.slo();
  j.rollout_s = r.worst_rollout_s();
  j.training_s = r.worst_training_s();
  j.model_gb = double(r.model_bytes()) / 1e9;
  j.iterations = int64_t(r.iterations());
  j.sync_s = r.sync_s();
  j.iterations_before = int64_t(r.iterations_before());
  j.profile = r.profile();
  out.state = *state;
  out.group = r.group_id();
  out.reason = r.reason();
  out.iterations_done = int64_t(r.iterations_done());
  return out;
}

std::string encode_group(const group_record& rec) {
  v1::Group g;
  g.set_id(rec.id);
  for (auto& j : rec.jobs)
    g.add_job_ids(j);
  for (auto& n : rec.rollout_nodes)
    g.add_rollout_nodes(n);
  for (auto& n : rec.training_nodes)
    g.add_training_nodes(n);
  return g.SerializeAsString();
}

std::string encode_placement(const placement_record& rec) {
  v1::Placement p;
  p.set_job_id(rec.job);
  p.set_group_id(rec.group);
  for (auto& s : rec.rollout) {
    auto* share = p.add_rollout();
    share->set_node(s.node);
    share->set_gpus(uint32_t(s.gpus));
  }
  for (auto& s : rec.training) {
    auto* share = p.add_training();
    share->set_node(s.node);
    share->set_gpus(uint32_t(s.gpus));
  }
  return p.SerializeAsString();
}

std::optional<group_record> decode_group(std::string_view bytes) {
  v1::Group g;
  if (!g.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  group_record out{g.id(), {}, {}, {}};
  out.jobs.assign(g.job_ids().begin(), g.job_ids().end());
  out.rollout_nodes.assign(g.rollout_nodes().begin(), g.rollout_nodes().end());
  out.training_nodes.assign(g.training_nodes().begin(), g.training_nodes().end());
  return out;
}

std::optional<placement_record> decode_placement(std::string_view bytes) {
  v1::Placement p;
  if (!p.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  placement_record out{p.job_id(), p.group_id(), {}, {}};
  for (auto& s : p.rollout())
    out.rollout.push_back({s.node(), int(s.gpus())});
  for (auto& s : p.training())
    out.training.push_back({s.node(), int(s.gpus())});
  return out;
}

std::string encode_progress(const job_progress& rec) {
  v1::JobProgress p;
  p.set_job_id(rec.job);
  p.set_group_id(rec.group);
  p.set_position(rec.position);
  p.set_round(rec.round);
  p.set_iterations_done(uint64_t(rec.iterations_done));
  return p.SerializeAsString();
}

std::optional<job_progress> decode_progress(std::string_view bytes) {
  v1::JobProgress p;
  if (!p.ParseFromArray(bytes.data(), int(bytes.size())) || p.job_id().empty())
    return std::nullopt;
  return job_progress{p.job_id(), p.group_id(), p.position(), p.round(),
                      int64_t(p.iterations_done())};
}

std::string encode_scheduler_meta(const scheduler_meta& meta) {
  v1::SchedulerMeta m;
  m.set_next_group(meta.next_group);
  for (auto& [node, reason] : meta.failed_nodes) {
    auto* o = m.add_failed_nodes();
    o->set_node(node);
    o->set_reason(reason);
  }
  return m.SerializeAsString();
}

std::optional<scheduler_meta> decode_scheduler_meta(std::string_view bytes) {
  v1::SchedulerMeta m;
  if (!m.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  scheduler_meta out{m.next_group(), {}};
  for (auto& o : m.failed_nodes())
    out.failed_nodes[o.node()] = o.reason();
  return out;
}

std::string encode_device_plan(const device_plan_record& rec) {
  v1::CircuitPlan p;
  p.set_device(rec.device);
  p.set_version(rec.version);
  if (!rec.circuits.empty()) {
    p.set_intent(std::string{to_string(rec.stage)});
    p.set_stage(to_proto(rec.stage));
  }
  for (auto& c : rec.circuits) {
    auto* pc = p.add_circuits();
    pc->set_a(c.a);
    pc->set_b(c.b);
    pc->set_owner(c.owner);
    pc->set_version(c.version);
    pc->set_stage(std::string{to_string(c.stage)});
    pc->set_stage_kind(to_proto(c.stage));
  }
  for (auto& x : rec.cross_connects) {
    auto* xc = p.add_cross_connects();
    xc->set_in_port(x.in);
    xc->set_out_port(x.out);
  }
  return p.SerializeAsString();
}

std::optional<device_plan_record> decode_device_plan(std::string_view bytes) {
  v1::CircuitPlan p;
  if (!p.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  device_plan_record out;
  out.device = p.device();
  out.version = p.version();
  out.stage = read_either<fabric_stage>(p.stage(), p.intent()).value_or(fabric_stage::train_compute);
  for (auto& c : p.circuits())
    out.circuits.push_back(
      {c.a(), c.b(), c.owner(), c.version(),
       read_either<fabric_stage>(c.stage_kind(), c.stage()).value_or(fabric_stage::train_compute)});
  for (auto& x : p.cross_connects())
    out.cross_connects.push_back({x.in_port(), x.out_port()});
  return out;
}

std::string encode_opus_job(const opus_job_record& rec) {
  v1::OpusJobRecord r;
  auto& j = *r.mutable_job();
  j.set_job(rec.job.job);
  j.set_pp(uint32_t(rec.job.pp));
  for (int d : rec.job.symmetrical)
    j.add_symmetrical(uint32_t(d));
  for (auto& rail : rec.job.rails)
    j.add_rails(rail);
  j.set_initial(rec.job.initial);
  j.set_first_port(rec.job.first_port);
  for (auto& t : rec.job.traces) {
    auto* trace = j.add_traces();
    trace->set_stage(uint32_t(t.stage));
    for (int d : t.digits)
      trace->add_digits(uint32_t(d));
  }
  r.set_topo(rec.topo);
  return r.SerializeAsString();
}

std::optional<opus_job_record> decode_opus_job(std::string_view bytes) {
  v1::OpusJobRecord r;
  if (!r.ParseFromArray(bytes.data(), int(bytes.size())) || r.job().job().empty())
    return std::nullopt;
  auto& j = r.job();
  opus_job_record out{{j.job(), int(j.pp()), {j.symmetrical().begin(), j.symmetrical().end()},
                       {j.rails().begin(), j.rails().end()}, j.initial(), {},
                       std::max(1u, j.first_port())}, // records from before Opus §7 sharing
                      r.topo()};
  for (auto& t : j.traces())
    out.job.traces.push_back({int(t.stage()), {t.digits().begin(), t.digits().end()}});
  return out;
}

} // namespace loom
