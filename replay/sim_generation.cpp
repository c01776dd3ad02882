#include "replay/sim_generation.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"

namespace loom::replay {

std::optional<gen_sample> sample_of(const std::vector<std::vector<gen_sample>>& steps,
                                    uint64_t id) {
  const auto step = id >> 32;
  const auto index = id & 0xffffffffu;
  if (step >= steps.size() || index >= steps[step].size())
    return std::nullopt;
  return steps[step][index];
}

namespace {

using self_ptr = simulated_generation_actor::stateful_pointer<sim_generation_state>;

double now_s(self_ptr self) {
  return std::chrono::duration<double>(self->clock().now() - self->state.origin).count();
}

int64_t at_ns(self_ptr self, double t) {
  return self->state.origin.time_since_epoch().count() + std::llround(t * 1e9);
}

caf::timespan span_of(double seconds) {
  return caf::timespan{std::llround(std::max(0.0, seconds) * 1e9)};
}

void fail(self_ptr self, std::string why) {
  auto& st = self->state;
  if (st.log->error.empty())
    st.log->error = std::move(why);
  st.done = true;
  self->quit();
}

/// An engine's finishes go to the controller (before any answer that follows them).
void report_finished(self_ptr self, engine_sim& e) {
  std::map<uint64_t, requests_finished> per_step;
  for (auto& f : e.take_finished()) {
    auto& r = per_step[f.step];
    r.engine = e.id();
    r.step = f.step;
    r.done.push_back({f.id, f.output_tokens, at_ns(self, f.at_s)});
  }
  for (auto& [step, r] : per_step)
    self->request(self->state.controller, caf::infinite, finished_atom::value, std::move(r))
      .then([](ok_atom) {}, [self](caf::error& err) { fail(self, render(err)); });
}

void register_engines(self_ptr self) {
  auto& st = self->state;
  auto joined = std::make_shared<size_t>(0);
  for (auto& e : st.engines) {
    engine_hello h{e.id(), e.id(), st.config.gpus_per_engine, false};
    self->request(st.controller, caf::infinite, engine_atom::value, h)
      .then(
        [self, joined](ok_atom) {
          if (++*joined == self->state.engines.size()) {
            self->send(self, step_atom::value);
            self->send(self, tick_atom::value);
          }
        },
        [self](caf::error& err) { fail(self, render(err)); });
  }
}

void start_step(self_ptr self) {
  auto& st = self->state;
  if (st.step >= st.config.steps.size()) {
    st.done = true;
    st.log->done = true;
    for (auto& e : st.engines)
      st.log->preemptions += e.preemptions();
    self->quit();
    return;
  }
  step_batch b;
  b.step = st.step;
  auto& samples = st.config.steps[st.step];
  for (size_t i = 0; i < samples.size(); ++i)
    b.requests.push_back({request_id(st.step, i), samples[i].prompt_tokens, 0, -1});
  st.step_start_s = now_s(self);
  st.log->step_starts.push_back(st.step_start_s);
  self->request(st.controller, caf::infinite, step_atom::value, std::move(b))
    .then([](const step_placement&) {}, [self](caf::error& err) { fail(self, render(err)); });
}

/// The router hears the step is over: the trainer takes its turn, and the next step starts
/// after it (synchronous) or with it (one step asynchronous): rl_step_clock.
void step_done(self_ptr self, const step_outcome& o) {
  auto& st = self->state;
  if (o.step != st.step)
    return;
  if (o.aborted) { // the run ends here: its makespan would count an unfinished step
    fail(self, fmt::format("step {} aborted: {}", o.step, o.reason));
    return;
  }
  const double last_s = double(o.last_finished_at_ns - st.origin.time_since_epoch().count()) / 1e9;
  const double makespan = last_s - st.step_start_s;
  st.log->makespans.push_back(makespan);
  if (st.step == st.config.curve_step)
    st.log->curve.emplace_back(makespan, 0);
  ++st.step;
  if (!st.clock)
    st.clock.emplace(st.config.training_s, st.config.off_policy_steps);
  const double next = st.clock->step_ended(last_s);
  self->delayed_send(self, span_of(next - now_s(self)), step_atom::value);
}

void tick(self_ptr self) {
  auto& st = self->state;
  if (st.done)
    return;
  const double t = now_s(self);
  for (auto& e : st.engines) {
    e.advance_to(t);
    if (auto why = e.stuck()) {
      fail(self, fmt::format("step {}: {}", st.step, *why));
      return;
    }
    report_finished(self, e);
    for (auto& s : e.stats())
      self->send(st.controller, stats_atom::value, std::move(s));
  }
  self->delayed_send(self, span_of(st.config.tick_s), tick_atom::value);
}

void command(self_ptr self, const gen_command& c) {
  auto& st = self->state;
  auto it = st.by_id.find(c.engine);
  if (it == st.by_id.end())
    return; // not one of ours: it times out, as a lost engine's would
  auto& e = st.engines[it->second];
  const double t = now_s(self);
  auto answer = e.apply(c, t);
  report_finished(self, e);
  if (answer.due_s <= t)
    self->send(st.controller, ack_atom::value, std::move(answer.ack));
  else
    self->delayed_send(self, span_of(answer.due_s - t), deliver_atom::value, e.id(),
                       std::move(answer.ack));
}

} // namespace

simulated_generation_actor::behavior_type
simulated_generation(simulated_generation_actor::stateful_pointer<sim_generation_state> self,
                     engine_model engine, sim_generation_config config,
                     std::shared_ptr<gen_run_log> log) {
  auto& st = self->state;
  st.engine.emplace(std::move(engine));
  st.config = std::move(config);
  st.log = std::move(log);
  st.origin = self->clock().now();
  auto steps = std::make_shared<std::vector<std::vector<gen_sample>>>(st.config.steps);
  auto output_of = [steps](uint64_t id) {
    auto s = sample_of(*steps, id);
    return s ? s->output_tokens : int64_t{1};
  };
  for (int i = 0; i < st.config.engines; ++i) {
    auto id = fmt::format("engine-{}", i);
    st.by_id[id] = st.engines.size();
    st.engines.emplace_back(*st.engine, id, st.config.loaded, st.config.costs, output_of);
  }
  return {
    [self](connect_atom, gen_controller_actor controller) {
      self->state.controller = std::move(controller);
      register_engines(self);
    },
    [self](step_atom) { start_step(self); },
    [self](tick_atom) { tick(self); },
    [self](deliver_atom, const std::string&, command_ack& a) {
      self->send(self->state.controller, ack_atom::value, std::move(a));
    },
    [self](command_atom, const std::string&, const gen_command& c) { command(self, c); },
    [self](step_done_atom, const step_outcome& o) { step_done(self, o); },
  };
}

gen_observer_actor::behavior_type
gen_recorder(gen_observer_actor::stateful_pointer<gen_recorder_state> self,
             std::shared_ptr<gen_run_log> log, size_t curve_step) {
  self->state.log = std::move(log);
  self->state.curve_step = curve_step;
  return {
    [self](gen_atom, const gen_record& r) {
      auto& log = *self->state.log;
      switch (r.kind) {
        case gen_record_kind::reconfigured:
          log.timeline.push_back(fmt::format("step {} at {:.1f} s: {}", r.step, r.step_s,
                                             r.detail));
          if (r.step == self->state.curve_step)
            log.curve_reconfigs.emplace_back(r.step_s, r.detail);
          break;
        case gen_record_kind::migrated:
          if (log.step_migrations.size() <= r.step)
            log.step_migrations.resize(r.step + 1);
          ++log.step_migrations[r.step];
          if (r.step == self->state.curve_step)
            ++log.curve_migrations[int64_t(std::floor(r.step_s / migration_bin_s))];
          break;
        case gen_record_kind::planned: log.solve_ms.push_back(r.solve_ms); break;
        case gen_record_kind::switched:
          // One set up for a batch that never came ends only once the controller gives up
          // the engines the finished run left: not the run's.
          if (!log.done)
            log.switches.push_back({r.switch_s, r.kv_s, r.planned_s});
          break;
        case gen_record_kind::step_started:
        case gen_record_kind::progress:
          if (r.step == self->state.curve_step)
            log.curve.emplace_back(r.step_s, r.pending);
          break;
        case gen_record_kind::forecast_scored:
          if (r.forecast_error >= 0) {
            log.forecast_histogram_error.push_back(r.forecast_error);
            log.forecast_mean_error.push_back(r.forecast_mean_error);
          }
          break;
        default: break;
      }
    },
  };
}

} // namespace loom::replay
