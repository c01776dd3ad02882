#include "generation/gen_controller.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/gen_codecs.hpp"
#include "store/persist.hpp"

namespace loom {

namespace {

using self_ptr = gen_controller_actor::stateful_pointer<gen_controller_state>;

double now_s(self_ptr self) {
  return std::chrono::duration<double>(self->clock().now() - self->state.origin).count();
}

const std::string& name_of(self_ptr self) {
  return self->state.runtime->config().name;
}

/// The decisions among the records go to the event log, with the record that carries them.
std::optional<loom_event> event_of(const gen_record& r) {
  auto detail = fmt::format("step={} step_s={:.1f} {}", r.step, r.step_s, r.detail);
  switch (r.kind) {
    case gen_record_kind::reconfigured:
      return loom_event{event_kind::gen_reconfigured, r.deployment, detail};
    case gen_record_kind::step_started:
      return loom_event{event_kind::gen_step_started, r.deployment,
                        fmt::format("step={} requests={}", r.step, r.pending)};
    case gen_record_kind::step_done:
      return loom_event{event_kind::gen_step_done, r.deployment,
                        fmt::format("step={} step_s={:.1f} preemptions={}", r.step, r.step_s,
                                    r.preemptions)};
    case gen_record_kind::step_aborted:
      return loom_event{event_kind::gen_step_aborted, r.deployment,
                        fmt::format("step={} unfinished={} reason=\"{}\"", r.step, r.pending,
                                    r.detail)};
    case gen_record_kind::engine_lost:
      return loom_event{event_kind::gen_engine_lost, r.deployment, detail};
    case gen_record_kind::command_abandoned:
      return loom_event{event_kind::gen_command_abandoned, r.deployment, detail};
    default: return std::nullopt;
  }
}

/// Sends the batches whose writes are durable, in order.
void release_outgoing(self_ptr self) {
  auto& st = self->state;
  while (!st.outgoing.empty() && st.outgoing.front().durable) {
    for (auto& c : st.outgoing.front().commands)
      self->send(st.links.edge, command_atom::value, name_of(self), std::move(c));
    st.outgoing.pop_front();
  }
}

void answer_routers(self_ptr self) {
  auto& st = self->state;
  if (st.routers.empty())
    return;
  auto placed = st.runtime->placement();
  if (placed) {
    for (auto& p : st.routers)
      p.deliver(*placed);
  } else if (!st.runtime->has_engines()) {
    // The last engine is gone: the step cannot be placed until one registers again.
    auto why = fmt::format("deployment '{}' has no engine left to place its step", name_of(self));
    for (auto& p : st.routers)
      p.deliver(make_error(errc::unavailable, why));
  } else {
    return;
  }
  st.routers.clear();
}

/// Makes what the runtime decided durable, then sends its commands: the deployment's record
/// and the decisions' events in one write, with `extra` records (a batch, finishes).
void commit(self_ptr self, write_batch extra = {}, std::function<void()> then = {}) {
  auto& st = self->state;
  auto& rt = *st.runtime;
  std::vector<loom_event> events; // logged by persist once durable
  for (auto& r : rt.take_records()) {
    if (auto e = event_of(r))
      events.push_back(std::move(*e));
    if (st.links.observer)
      self->send(st.links.observer, gen_atom::value, std::move(r));
  }
  auto commands = rt.take_commands();
  const bool dirty = rt.take_dirty();
  st.outgoing.push_back({std::move(commands), false});
  auto* mine = &st.outgoing.back();
  if (!dirty && extra.records.empty() && events.empty() && mine->commands.empty()) {
    mine->durable = true;
    release_outgoing(self);
    answer_routers(self);
    if (then)
      then();
    return;
  }
  write_batch batch = std::move(extra);
  batch.sync = st.links.sync_writes;
  batch.records.push_back({record_kind::gen_deployments, name_of(self),
                           encode_gen_deployment(name_of(self), rt.record()), false});
  persist(
    self, st.links.store, std::move(batch), std::move(events),
    [self, mine, then] {
      mine->durable = true;
      release_outgoing(self);
      answer_routers(self);
      if (then)
        then();
    },
    [self, mine](const caf::error& err) {
      // Not durable: nothing is sent. The commands stay in flight and go again at their
      // deadline, when the next write may succeed.
      spdlog::error("event=gen_write_failed deployment={} error=\"{}\"", name_of(self),
                    render(err));
      mine->commands.clear();
      mine->durable = true;
      release_outgoing(self);
    });
}

void arm_alarm(self_ptr self) {
  auto& st = self->state;
  auto due = st.runtime->next_deadline();
  if (!due || (st.alarm_at && *st.alarm_at <= *due))
    return;
  st.alarm_at = due;
  const double delay = std::max(0.001, *due - now_s(self));
  self->delayed_send(self, caf::timespan{int64_t(std::ceil(delay * 1e9))}, tick_atom::value,
                     ++st.alarm);
}

void ask_planner(self_ptr self, gen_snapshot snap);

void ask_balancer(self_ptr self, std::vector<gen_worker> loads) {
  self->request(self->state.links.balancer, caf::infinite, balance_atom::value, std::move(loads))
    .then(
      [self](const std::vector<migration>& moves) {
        self->state.runtime->on_migrations(moves, now_s(self));
        commit(self);
        arm_alarm(self);
      },
      [self](caf::error& err) {
        spdlog::warn("event=gen_balancer_failed deployment={} error=\"{}\"", name_of(self),
                     render(err));
        self->state.runtime->balance_failed();
      });
}

/// An engine's load report listed more requests than the step has: one line per engine every
/// 10 s while it goes on.
void stats_refused(self_ptr self, const instance_stats& s) {
  const double now = now_s(self);
  auto [it, fresh] = self->state.stats_refused_at.try_emplace(s.engine, now);
  if (!fresh && now - it->second < 10)
    return;
  it->second = now;
  spdlog::warn("event=gen_stats_refused deployment={} engine={} requests={} reason=\"more "
               "requests than the step has\"",
               name_of(self), s.engine, s.requests.size());
}

/// After anything changed: a due tick asks the balancer and maybe the planner, requests
/// without an instance are planned, and what was decided is made durable and sent.
void after_event(self_ptr self) {
  auto& rt = *self->state.runtime;
  const double now = now_s(self);
  if (rt.tick_due(now)) {
    auto work = rt.tick(now);
    if (work.balance)
      ask_balancer(self, std::move(*work.balance));
    if (work.plan)
      ask_planner(self, std::move(*work.plan));
  }
  if (auto snap = rt.plan_now(now))
    ask_planner(self, std::move(*snap));
  commit(self);
  arm_alarm(self);
}

void ask_planner(self_ptr self, gen_snapshot snap) {
  self->request(self->state.links.planner, caf::infinite, plan_atom::value, std::move(snap))
    .then(
      [self](const gen_decision& d) {
        self->state.runtime->on_decision(d, now_s(self));
        after_event(self);
      },
      [self](caf::error& err) {
        spdlog::warn("event=gen_planner_failed deployment={} error=\"{}\"", name_of(self),
                     render(err));
        self->state.runtime->plan_failed();
      });
}

/// The step is over: its routers hear, and the planner learns its lengths.
void step_over(self_ptr self, const step_outcome& outcome, std::vector<request_done> outputs) {
  auto& st = self->state;
  self->send(st.links.edge, step_done_atom::value, outcome);
  if (!st.links.planner)
    return;
  self->request(st.links.planner, caf::infinite, step_done_atom::value, outcome.step,
                std::move(outputs))
    .then(
      [self, outcome](double histogram, double mean) {
        if (auto next = self->state.runtime->next_step_snapshot())
          ask_planner(self, std::move(*next));
        gen_record r;
        r.deployment = name_of(self);
        r.kind = gen_record_kind::forecast_scored;
        r.step = outcome.step;
        r.forecast_error = std::isnan(histogram) ? -1 : histogram;
        r.forecast_mean_error = std::isnan(mean) ? -1 : mean;
        self->state.last_forecast_error = r.forecast_error;
        if (self->state.links.observer)
          self->send(self->state.links.observer, gen_atom::value, std::move(r));
      },
      [self](caf::error& err) {
        spdlog::warn("event=gen_forecast_failed deployment={} error=\"{}\"", name_of(self),
                     render(err));
      });
}

caf::result<ok_atom> on_finished(self_ptr self, const requests_finished& f) {
  auto& st = self->state;
  auto result = st.runtime->on_finished(f, now_s(self));
  write_batch extra;
  for (auto& d : result.fresh)
    extra.records.push_back({record_kind::gen_steps, gen_finished_key(name_of(self), f.step, d.id),
                             encode_request_done(d), false});
  if (!result.refused.empty())
    spdlog::warn("event=gen_finish_refused deployment={} engine={} step={} reason=\"{}\"",
                 name_of(self), f.engine, f.step, result.refused);
  if (result.fresh.empty() && !result.refused.empty())
    return make_error(errc::conflict, result.refused);
  auto promise = self->make_response_promise<ok_atom>();
  std::optional<step_outcome> done = result.step_done;
  std::vector<request_done> step_outputs;
  if (done)
    step_outputs = st.runtime->step_outputs();
  commit(self, std::move(extra), [self, promise, done, step_outputs]() mutable {
    promise.deliver(ok_atom::value);
    if (done)
      step_over(self, *done, step_outputs);
  });
  after_event(self);
  return promise;
}

/// The step ended unfinished: once that is durable its routers hear why, then `then` runs.
/// The planner does not learn from it (its lengths are cut short).
void step_aborted(self_ptr self, const step_outcome& outcome, std::function<void()> then = {}) {
  commit(self, {}, [self, outcome, then = std::move(then)] {
    self->send(self->state.links.edge, step_done_atom::value, outcome);
    if (then)
      then();
  });
  after_event(self);
}

caf::result<step_placement> on_step(self_ptr self, const step_batch& batch) {
  auto& st = self->state;
  auto& rt = *st.runtime;
  using admission = deployment_runtime::step_admission;
  switch (rt.start_step(batch, now_s(self))) {
    case admission::busy:
      return make_error(errc::conflict,
                        fmt::format("deployment '{}' still runs step {}", name_of(self),
                                    rt.status().step));
    case admission::no_engines:
      return make_error(errc::unavailable,
                        fmt::format("deployment '{}' has no engine registered", name_of(self)));
    case admission::done: {
      auto outcome = rt.done_outcome(batch.step);
      step_placement p;
      p.step = batch.step;
      p.deployment = rt.serving();
      p.done = true;
      p.last_finished_at_ns = outcome ? outcome->last_finished_at_ns : 0;
      return p;
    }
    case admission::current:
      if (auto p = rt.placement())
        return *p;
      break;
    case admission::started: {
      write_batch extra;
      // Only the running step's batch and finishes are ever read back (a restart's), so the
      // steps before it go: the store stays the size of one step ([ha]: within etcd's quota).
      record_write earlier{record_kind::gen_steps, gen_step_key(name_of(self), 0), {}, true};
      earlier.erase_to = gen_step_key(name_of(self), batch.step); // step 0: an empty range
      extra.records.push_back(std::move(earlier));
      extra.records.push_back({record_kind::gen_steps, gen_step_key(name_of(self), batch.step),
                               encode_gen_step(name_of(self), *rt.current_step()), false});
      commit(self, std::move(extra));
      break;
    }
  }
  auto promise = self->make_response_promise<step_placement>();
  st.routers.push_back(promise);
  after_event(self);
  return promise;
}

caf::result<ok_atom> on_engine(self_ptr self, const engine_hello& h) {
  auto& rt = *self->state.runtime;
  if (auto no = rt.refusal(h))
    return make_error(h.gpus != rt.config().gpus_per_engine() ? errc::invalid_argument
                                                              : errc::conflict,
                      *no);
  rt.join(h, now_s(self));
  auto promise = self->make_response_promise<ok_atom>();
  commit(self, {}, [promise]() mutable { promise.deliver(ok_atom::value); });
  after_event(self);
  return promise;
}

} // namespace

gen_controller_actor::behavior_type
gen_controller(gen_controller_actor::stateful_pointer<gen_controller_state> self,
               engine_model engine, deployment_config config, gen_controller_links links,
               gen_controller_restore restored) {
  auto& st = self->state;
  st.engine.emplace(std::move(engine));
  st.runtime.emplace(*st.engine, std::move(config));
  st.links = std::move(links);
  st.origin = self->clock().now();
  if (restored.record)
    st.runtime->restore(*restored.record, restored.step, restored.finished, 0.0);
  arm_alarm(self);
  return {
    [self](engine_atom, const engine_hello& h) { return on_engine(self, h); },
    [self](lost_atom, const std::string& engine, const std::string& why) {
      self->state.runtime->lose(engine, why, now_s(self));
      after_event(self);
    },
    [self](stats_atom, const instance_stats& s) {
      if (!self->state.runtime->on_stats(s, now_s(self)))
        stats_refused(self, s);
      after_event(self);
    },
    [self](finished_atom, const requests_finished& f) { return on_finished(self, f); },
    [self](ack_atom, const command_ack& a) {
      self->state.runtime->on_ack(a, now_s(self));
      after_event(self);
    },
    [self](step_atom, const step_batch& b) { return on_step(self, b); },
    [self](status_atom) {
      auto s = self->state.runtime->status();
      s.last_forecast_error = self->state.last_forecast_error;
      return s;
    },
    [self](tick_atom, uint64_t version) {
      auto& st = self->state;
      if (version != st.alarm)
        return;
      st.alarm_at.reset();
      if (auto aborted = st.runtime->expire(now_s(self)))
        step_aborted(self, *aborted);
      else
        after_event(self);
    },
    [self](plan_atom, const parallel_config& layout) -> caf::result<ok_atom> {
      if (auto no = self->state.runtime->force_layout(layout, now_s(self)))
        return make_error(errc::conflict, *no);
      auto promise = self->make_response_promise<ok_atom>();
      commit(self, {}, [promise]() mutable { promise.deliver(ok_atom::value); });
      after_event(self);
      return promise;
    },
    [self](step_done_atom) -> caf::result<step_outcome> {
      if (auto last = self->state.runtime->last_outcome())
        return *last;
      return make_error(errc::not_found,
                        fmt::format("deployment '{}' has ended no step", name_of(self)));
    },
    [self](cancel_atom, const std::string& why) -> caf::result<step_outcome> {
      auto aborted = self->state.runtime->abort_step(why, now_s(self));
      if (!aborted)
        return make_error(errc::not_found,
                          fmt::format("deployment '{}' runs no step", name_of(self)));
      // An operator's cancel is a request: it is answered once the abort is durable. The
      // step's timeout (tick_atom above) aborts with no one to answer.
      auto promise = self->make_response_promise<step_outcome>();
      step_aborted(self, *aborted, [promise, outcome = *aborted]() mutable {
        promise.deliver(outcome);
      });
      return promise;
    },
  };
}

} // namespace loom
