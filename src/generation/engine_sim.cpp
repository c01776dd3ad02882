#include "generation/engine_sim.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "generation/layout.hpp"

namespace loom {

namespace {

constexpr size_t remembered_commands = 1024;

} // namespace

engine_sim::engine_sim(const engine_model& engine, std::string id, parallel_config loaded,
                       engine_sim_costs costs, output_lookup output_of)
  : engine_(&engine), id_(std::move(id)), loaded_{loaded}, standby_{loaded}, costs_(costs),
    output_of_(std::move(output_of)) {}

double engine_sim_costs::reshard_s(const engine_model& engine, const parallel_config& c,
                                   bool standby) const {
  const double restart = standby ? std::min(standby_restart_s, engine_restart_s)
                                 : engine_restart_s;
  return restart + engine.weight_bytes_per_gpu(c) / (weight_load_gbps * 1e9);
}

engine_sim_costs engine_sim_costs_of(const planner_params& p) {
  return {p.engine_restart_s, p.standby_restart_s, p.weight_load_gbps, p.kv_path};
}

engine_sim::answer engine_sim::apply(const gen_command& c, double t) {
  if (auto seen = answered_.find(c.id); seen != answered_.end())
    return {seen->second.ack, std::max(t, seen->second.due_s)};
  advance_to(t);
  answer a;
  switch (c.kind) {
    case gen_command_kind::drain: a = drain(c, t); break;
    case gen_command_kind::reshard: a = reshard(c, t); break;
    case gen_command_kind::admit: a = admit(c, t); break;
    case gen_command_kind::migrate: a = release(c, t); break;
  }
  a.ack.command = c.id;
  a.ack.engine = id_;
  answered_[c.id] = a;
  if (answered_.size() > remembered_commands)
    answered_.erase(answered_.begin());
  return a;
}

request_state engine_sim::state_of(uint64_t id, const sim_request& s, bool running) const {
  auto it = prompts_.find(id);
  auto prompt = it == prompts_.end() ? int64_t{0} : it->second;
  return {id, prompt, std::max<int64_t>(0, s.context - prompt), running, s.kv_resident};
}

engine_sim::answer engine_sim::drain(const gen_command& c, double t) {
  answer a{{}, t};
  for (auto& [k, h] : instances_) {
    harvest(h);
    for (auto& p : h.sim.requests()) {
      a.ack.released.push_back(state_of(p.id, p.state, p.running));
      h.sim.take(p.id);
    }
    for (auto& in : h.arrivals) // its KV was on the way: it travels on with it
      a.ack.released.push_back(state_of(in.id, in.state, false));
    retired_preemptions_ += h.sim.preemptions();
  }
  instances_.clear();
  for (auto& r : a.ack.released) {
    prompts_.erase(r.id);
    steps_.erase(r.id);
  }
  epoch_ = c.epoch;
  return a;
}

engine_sim::answer engine_sim::reshard(const gen_command& c, double t) {
  // C_sw: the restart and the shards of every config it does not hold yet, the slowest last;
  // nothing when it already runs them (its first layout, or its part of a mixed layout that
  // stays).
  std::vector<parallel_config> carried;
  double load_s = 0;
  for (auto& s : carried_by(c.slots, id_)) {
    if (std::find(carried.begin(), carried.end(), s.config) != carried.end())
      continue;
    carried.push_back(s.config);
    if (std::find(loaded_.begin(), loaded_.end(), s.config) != loaded_.end())
      continue;
    const bool standby = std::find(standby_.begin(), standby_.end(), s.config) != standby_.end();
    load_s = std::max(load_s, costs_.reshard_s(*engine_, s.config, standby));
    if (!standby)
      standby_.push_back(s.config);
  }
  for (auto& [k, h] : instances_)
    retired_preemptions_ += h.sim.preemptions();
  instances_.clear();
  for (auto& s : c.slots)
    if (!s.engines.empty() && s.engines.front() == id_) {
      auto [it, added] =
        instances_.emplace(s.instance, hosted{instance_sim{*engine_, s.config}, {}, 0});
      it->second.sim.wait_until(t + load_s);
    }
  loaded_ = std::move(carried);
  epoch_ = c.epoch;
  answer a{{}, t + load_s};
  a.ack.elapsed_s = load_s;
  return a;
}

sim_request engine_sim::resume_state(const admitted_request& r, bool kv) const {
  int64_t remaining = output_of_(r.id) - r.generated;
  return {r.prompt_tokens + r.generated, std::max<int64_t>(remaining, 1), kv};
}

engine_sim::answer engine_sim::admit(const gen_command& c, double t) {
  answer a{{}, t};
  auto it = instances_.find(c.instance);
  if (it == instances_.end() || c.epoch != epoch_) {
    a.ack.ok = false;
    a.ack.detail = fmt::format("engine {} does not lead instance {} of layout {}", id_,
                               c.instance, c.epoch);
    return a;
  }
  auto& h = it->second;
  const auto& config = h.sim.config();
  for (auto& r : c.requests) {
    prompts_[r.id] = r.prompt_tokens;
    steps_[r.id] = c.step;
  }
  if (c.resume) {
    // The instance starts once the KV moved onto it has arrived; those requests go first.
    int64_t sequences = 0;
    int64_t tokens = 0;
    for (auto& r : c.requests)
      if (r.kv_transfer) {
        ++sequences;
        tokens += r.prompt_tokens + r.generated;
      }
    double start = std::max(t, h.sim.now());
    if (sequences > 0)
      start += kv_move_cost_of(*engine_, config, int(sequences), tokens / sequences,
                               costs_.kv_path)
                 .transfer_s;
    h.sim.wait_until(start);
    for (bool kv : {true, false})
      for (auto& r : c.requests)
        if (r.kv_transfer == kv)
          h.sim.add(r.id, resume_state(r, kv));
    return a;
  }
  for (auto& r : c.requests) {
    auto state = resume_state(r, r.kv_transfer);
    if (!r.kv_transfer) {
      h.sim.wait_until(t);
      h.sim.add(r.id, state);
      continue;
    }
    double ready =
      t + kv_move_cost_of(*engine_, config, 1, state.context, costs_.kv_path).transfer_s;
    auto at = std::upper_bound(h.arrivals.begin(), h.arrivals.end(), ready,
                               [](double x, const arrival& y) { return x < y.ready_s; });
    h.arrivals.insert(at, arrival{ready, r.id, state});
  }
  return a;
}

engine_sim::answer engine_sim::release(const gen_command& c, double t) {
  answer a{{}, t};
  for (auto& m : c.moves)
    if (auto h = instances_.find(m.from); h != instances_.end())
      if (auto s = h->second.sim.take(m.request)) {
        a.ack.released.push_back(state_of(m.request, *s, s->kv_resident));
        prompts_.erase(m.request);
        steps_.erase(m.request);
      }
  return a;
}

void engine_sim::harvest(hosted& h) {
  auto& done = h.sim.finished();
  for (; h.harvested < done.size(); ++h.harvested) {
    auto [id, at] = done[h.harvested];
    auto step = steps_.find(id);
    finished_.push_back({id, step == steps_.end() ? 0 : step->second, output_of_(id), at});
    prompts_.erase(id);
    steps_.erase(id);
  }
}

void engine_sim::advance_to(double t) {
  for (auto& [k, h] : instances_) {
    size_t landed = 0;
    for (; landed < h.arrivals.size() && h.arrivals[landed].ready_s <= t; ++landed) {
      auto& in = h.arrivals[landed];
      h.sim.advance_to(in.ready_s);
      h.sim.wait_until(in.ready_s);
      h.sim.add(in.id, in.state);
    }
    h.arrivals.erase(h.arrivals.begin(), h.arrivals.begin() + long(landed));
    h.sim.advance_to(t);
    harvest(h);
  }
}

std::vector<instance_stats> engine_sim::stats() const {
  std::vector<instance_stats> out;
  for (auto& [k, h] : instances_) {
    instance_stats s;
    s.engine = id_;
    s.instance = k;
    s.epoch = epoch_;
    h.sim.for_each_request([&](const request_progress& p) {
      s.requests.push_back(state_of(p.id, p.state, p.running));
    });
    s.kv_free_tokens = h.sim.kv_free_tokens();
    s.kv_capacity_tokens = h.sim.kv_capacity_tokens();
    s.max_batch = h.sim.max_batch();
    s.decode_rate_tps = h.sim.step_rate();
    s.preemptions = h.sim.preemptions();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<engine_sim::finish> engine_sim::take_finished() {
  std::vector<finish> out;
  out.swap(finished_);
  return out;
}

bool engine_sim::idle() const {
  return std::all_of(instances_.begin(), instances_.end(),
                     [](auto& e) { return e.second.sim.idle() && e.second.arrivals.empty(); });
}

int64_t engine_sim::preemptions() const {
  int64_t n = retired_preemptions_;
  for (auto& [k, h] : instances_)
    n += h.sim.preemptions();
  return n;
}

std::optional<std::string> engine_sim::stuck() const {
  for (auto& [k, h] : instances_)
    if (!h.sim.feasible())
      return fmt::format("instance {} on engine {}: a request does not fit the KV cache of a {} "
                         "instance",
                         k, id_, h.sim.config().name());
  return std::nullopt;
}

} // namespace loom
