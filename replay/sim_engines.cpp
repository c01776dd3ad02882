#include "replay/sim_engines.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/inspect.hpp"

namespace loom::replay {

namespace {

using engines_ptr = simulated_engines_actor::stateful_pointer<sim_engines_state>;

double now_s(engines_ptr self) {
  return std::chrono::duration<double>(self->clock().now() - self->state.origin).count();
}

caf::timespan span_of(double seconds) {
  return caf::timespan{std::llround(std::max(0.0, seconds) * 1e9)};
}

sim_engines_state::request& request_of(sim_engines_state& st, uint64_t id) {
  return st.requests[size_t(id - st.first_id)];
}

bool known(const sim_engines_state& st, uint64_t id) {
  return id >= st.first_id && id - st.first_id < st.requests.size();
}

/// Adds a request to instance k at time t; an idle instance's clock first catches up.
void place(sim_engines_state& st, size_t k, uint64_t id, const sim_request& r, double t) {
  st.instances[k].wait_until(t);
  st.instances[k].add(id, r);
  request_of(st, id).instance = int(k);
}

void build_instances(sim_engines_state& st, const gen_deployment& d) {
  st.deployment = d;
  st.instances.clear();
  for (int k = 0; k < d.instances; ++k)
    st.instances.emplace_back(*st.engine, d.parallel);
  st.harvested.assign(size_t(d.instances), 0);
  st.preempted.assign(size_t(d.instances), 0);
}

/// Brings every instance up to `t` and collects what finished.
void advance(sim_engines_state& st, double t) {
  for (size_t k = 0; k < st.instances.size(); ++k) {
    auto& inst = st.instances[k];
    inst.advance_to(t);
    st.log->preemptions += inst.preemptions() - st.preempted[k];
    st.preempted[k] = inst.preemptions();
    auto& done = inst.finished();
    for (; st.harvested[k] < done.size(); ++st.harvested[k]) {
      auto [id, at] = done[st.harvested[k]];
      auto& r = request_of(st, id);
      r.finished = true;
      --st.pending;
      st.last_finish = std::max(st.last_finish, at);
      st.finished_since.push_back(r.sample.output_tokens);
      st.step_outputs.push_back(r.sample.output_tokens);
    }
  }
}

gen_snapshot snapshot(sim_engines_state& st) {
  gen_snapshot s;
  s.step = st.step;
  s.deployment = st.deployment;
  for (size_t i = 0; i < st.requests.size(); ++i) {
    auto& r = st.requests[i];
    if (r.finished)
      continue;
    s.pending.push_back({st.first_id + i, r.sample.prompt_tokens, 0, r.instance});
  }
  // Progress as the instances see it; a request on the wire keeps its state from the send.
  std::map<uint64_t, int64_t> generated;
  for (auto& inst : st.instances)
    for (auto& p : inst.requests())
      generated[p.id] = p.state.context;
  for (auto& p : s.pending) {
    auto& r = request_of(st, p.id);
    int64_t context = r.in_flight ? r.flight.context : generated[p.id];
    p.generated = std::max<int64_t>(0, context - r.sample.prompt_tokens);
  }
  s.finished_outputs = std::move(st.finished_since);
  st.finished_since.clear();
  return s;
}

std::vector<gen_worker> worker_loads(const sim_engines_state& st) {
  std::vector<gen_worker> out;
  for (size_t k = 0; k < st.instances.size(); ++k) {
    auto& inst = st.instances[k];
    gen_worker w;
    w.id = uint32_t(k);
    for (auto& p : inst.requests())
      (p.running ? w.running : w.waiting).push_back({p.id, p.state.context});
    w.kv_free_tokens = inst.kv_free_tokens();
    w.max_batch = inst.max_batch();
    w.decode_rate_tps = inst.step_rate();
    out.push_back(std::move(w));
  }
  return out;
}

void apply_migrations(engines_ptr self, const std::vector<migration>& moves) {
  auto& st = self->state;
  const double t = now_s(self);
  for (auto& m : moves) {
    if (m.from >= st.instances.size() || m.to >= st.instances.size() || !known(st, m.request))
      continue;
    auto state = st.instances[m.from].take(m.request);
    if (!state)
      continue; // finished meanwhile
    ++st.log->migrations;
    auto& r = request_of(st, m.request);
    if (!state->kv_resident) {
      place(st, m.to, m.request, *state, t);
      continue;
    }
    auto cost = kv_move_cost_of(*st.engine, st.deployment.parallel, 1, state->context,
                                st.config.kv_path);
    if (cost.recompute()) {
      ++st.log->kv_recomputes;
      state->kv_resident = false;
      place(st, m.to, m.request, *state, t);
      continue;
    }
    ++st.log->kv_transfers;
    r.instance = int(m.to);
    r.in_flight = true;
    r.flight = *state;
    r.flight_epoch = st.epoch;
    self->delayed_send(self, span_of(cost.transfer_s), deliver_atom::value, m.request);
  }
}

/// Every pending request's state: on an instance, on the wire (taken along), or a new batch's
/// not placed yet.
std::map<uint64_t, sim_request> pending_states(sim_engines_state& st) {
  std::map<uint64_t, sim_request> moving;
  for (auto& inst : st.instances)
    for (auto& p : inst.requests())
      moving[p.id] = p.state;
  for (size_t i = 0; i < st.requests.size(); ++i) {
    auto& r = st.requests[i];
    if (r.in_flight) {
      moving[st.first_id + i] = r.flight;
      r.in_flight = false;
    } else if (r.instance < 0 && !r.finished) {
      moving[st.first_id + i] = {r.sample.prompt_tokens, r.sample.output_tokens, false};
    }
  }
  return moving;
}

/// Instance k of the new deployment starts after the switch and, with KV moved onto it, after
/// the transfer (or its requests recompute, whichever is cheaper: App. A); requests that had
/// KV go first, keeping their place in the batch.
void land(sim_engines_state& st, size_t k, std::vector<std::pair<uint64_t, sim_request>>& moved,
          const gen_decision& d, double t) {
  int64_t sequences = 0;
  int64_t tokens = 0;
  for (auto& [id, s] : moved)
    if (s.kv_resident) {
      ++sequences;
      tokens += s.context;
    }
  double start = t + d.switch_s;
  if (sequences > 0) {
    auto cost = kv_move_cost_of(*st.engine, d.deployment.parallel, int(sequences),
                                tokens / sequences, st.config.kv_path);
    if (cost.recompute()) {
      st.log->kv_recomputes += sequences;
      for (auto& [id, s] : moved)
        s.kv_resident = false;
    } else {
      st.log->kv_transfers += sequences;
      start += cost.transfer_s;
    }
  }
  std::stable_partition(moved.begin(), moved.end(), [](auto& e) { return e.second.kv_resident; });
  for (auto& [id, s] : moved)
    place(st, k, id, s, start);
}

/// Moves every pending request onto the decided deployment (C_sw, then C_mig per instance).
void reconfigure(engines_ptr self, const gen_decision& d, const std::vector<uint64_t>& ids) {
  auto& st = self->state;
  const double t = now_s(self);
  auto moving = pending_states(st);
  st.log->timeline.push_back(fmt::format("step {} at {:.1f} s: {} -> {}", st.step,
                                         t - st.step_start, st.deployment.name(),
                                         d.deployment.name()));
  ++st.log->reconfigurations;
  ++st.epoch;
  build_instances(st, d.deployment);
  std::vector<std::vector<std::pair<uint64_t, sim_request>>> per(st.instances.size());
  for (size_t i = 0; i < ids.size() && i < d.assignment.size(); ++i) {
    auto it = moving.find(ids[i]);
    auto k = d.assignment[i];
    if (it == moving.end() || k < 0 || size_t(k) >= per.size())
      continue;
    per[size_t(k)].emplace_back(it->first, it->second);
    moving.erase(it);
  }
  for (auto& [id, state] : moving) // not in the plan (should not happen): spread them
    per[id % per.size()].emplace_back(id, state);
  for (size_t k = 0; k < per.size(); ++k)
    land(st, k, per[k], d, t);
}

void apply_decision(engines_ptr self, const gen_decision& d, const std::vector<uint64_t>& ids) {
  auto& st = self->state;
  st.log->solve_ms.push_back(d.solve_ms);
  if (d.reconfigure) {
    reconfigure(self, d, ids);
    return;
  }
  // Kept: requests not yet placed (a new batch) go where the planner put them.
  const double t = now_s(self);
  for (size_t i = 0; i < ids.size() && i < d.assignment.size(); ++i) {
    auto& r = request_of(st, ids[i]);
    auto k = d.assignment[i];
    if (r.instance < 0 && !r.finished && k >= 0 && size_t(k) < st.instances.size())
      place(st, size_t(k), ids[i], {r.sample.prompt_tokens, r.sample.output_tokens, false}, t);
  }
}

/// Sends the planner a snapshot; at a step's start its answer places the batch and starts
/// the step's ticks.
void ask_planner(engines_ptr self, bool starts_step) {
  auto& st = self->state;
  auto snap = snapshot(st);
  std::vector<uint64_t> ids;
  for (auto& p : snap.pending)
    ids.push_back(p.id);
  st.planning = true;
  st.next_plan_s = now_s(self) + st.config.plan_interval_s;
  const auto epoch = st.epoch;
  self->request(st.planner, caf::infinite, plan_atom::value, std::move(snap))
    .then(
      [self, ids, epoch, starts_step](gen_decision& d) {
        auto& st = self->state;
        st.planning = false;
        if (epoch == st.epoch)
          apply_decision(self, d, ids);
        if (starts_step)
          self->send(self, tick_atom::value);
      },
      [self](caf::error& err) {
        self->state.log->error = fmt::format("planner failed: {}", to_string(err));
        self->quit(err);
      });
}

void end_step(engines_ptr self) {
  auto& st = self->state;
  st.log->makespans.push_back(st.last_finish - st.step_start);
  if (st.step == st.config.curve_step)
    st.log->curve.emplace_back(st.last_finish - st.step_start, 0);
  spdlog::debug("event=gen_step_done step={} makespan_s={:.2f}", st.step,
                st.last_finish - st.step_start);
  const double next = st.last_finish + st.config.training_s - now_s(self);
  if (st.planner) {
    self->request(st.planner, caf::infinite, step_done_atom::value, uint64_t(st.step),
                  st.step_outputs)
      .then(
        [self](double histogram, double mean) {
          if (!std::isnan(histogram)) {
            self->state.log->forecast_histogram_error.push_back(histogram);
            self->state.log->forecast_mean_error.push_back(mean);
          }
        },
        [self](caf::error& err) {
          self->state.log->error = fmt::format("planner failed: {}", to_string(err));
          self->quit(err);
        });
  }
  ++st.step;
  self->delayed_send(self, span_of(next), step_atom::value);
}

/// The next step starts: its batch arrives (placed by the planner, or dealt round-robin).
void start_step(engines_ptr self) {
  auto& st = self->state;
  if (st.step >= st.config.steps.size()) {
    st.log->done = true;
    self->quit();
    return;
  }
  const double t = now_s(self);
  st.first_id += st.requests.size();
  st.requests.clear();
  for (auto& s : st.config.steps[st.step])
    st.requests.push_back({s});
  st.pending = st.requests.size();
  st.step_start = st.last_finish = t;
  st.step_outputs.clear();
  st.finished_since.clear();
  if (st.step == st.config.curve_step)
    st.log->curve.emplace_back(0.0, int64_t(st.pending));
  if (st.planner) {
    ask_planner(self, true);
    return;
  }
  for (size_t i = 0; i < st.requests.size(); ++i) {
    auto& s = st.requests[i].sample;
    place(st, i % st.instances.size(), st.first_id + i, {s.prompt_tokens, s.output_tokens, false},
          t);
  }
  self->send(self, tick_atom::value);
}

/// Algorithm 1 event 2: the balancer gets the instances' loads (one request at a time).
void balance(engines_ptr self) {
  auto& st = self->state;
  st.balancing = true;
  const auto epoch = st.epoch;
  self->request(st.balancer, caf::infinite, balance_atom::value, worker_loads(st))
    .then(
      [self, epoch](std::vector<migration>& moves) {
        self->state.balancing = false;
        if (epoch == self->state.epoch)
          apply_migrations(self, moves);
      },
      [self](caf::error& err) {
        self->state.log->error = fmt::format("balancer failed: {}", to_string(err));
        self->quit(err);
      });
}

/// A monitoring tick: the instances advance; the step ends, or the balancer and (every
/// planning period) the planner are consulted.
void tick(engines_ptr self) {
  auto& st = self->state;
  const double t = now_s(self);
  advance(st, t);
  for (auto& inst : st.instances)
    if (!inst.feasible()) { // a sequence longer than the instance's whole KV cache
      st.log->error = fmt::format("step {}: a request does not fit the KV cache of a {} "
                                  "instance", st.step, st.deployment.parallel.name());
      self->quit();
      return;
    }
  bool in_flight = std::any_of(st.requests.begin(), st.requests.end(),
                               [](auto& r) { return r.in_flight; });
  if (st.pending == 0 && !in_flight) {
    end_step(self);
    return;
  }
  if (st.step == st.config.curve_step)
    st.log->curve.emplace_back(t - st.step_start, int64_t(st.pending));
  if (st.balancer && !st.balancing)
    balance(self);
  if (st.planner && !st.planning && t >= st.next_plan_s)
    ask_planner(self, false);
  self->delayed_send(self, span_of(st.config.tick_s), tick_atom::value);
}

/// A migrated request's KV has arrived at its instance.
void deliver(engines_ptr self, uint64_t id) {
  auto& st = self->state;
  if (!known(st, id))
    return;
  auto& r = request_of(st, id);
  if (!r.in_flight || r.flight_epoch != st.epoch)
    return; // a reconfiguration took it along meanwhile
  r.in_flight = false;
  place(st, size_t(r.instance), id, r.flight, now_s(self));
}

} // namespace

simulated_engines_actor::behavior_type
simulated_engines(simulated_engines_actor::stateful_pointer<sim_engines_state> self,
                  engine_model engine, sim_engines_config config, gen_planner_actor planner,
                  balancer_actor balancer, std::shared_ptr<gen_run_log> log) {
  auto& st = self->state;
  st.engine.emplace(std::move(engine));
  st.config = std::move(config);
  st.planner = std::move(planner);
  st.balancer = std::move(balancer);
  st.log = std::move(log);
  st.origin = self->clock().now();
  build_instances(st, st.config.initial);
  self->send(self, step_atom::value);
  return {
    [self](step_atom) { start_step(self); },
    [self](tick_atom) { tick(self); },
    [self](deliver_atom, uint64_t id) { deliver(self, id); },
  };
}

} // namespace loom::replay
