// The deployment runtime's engines and layout, steps and finishes, persistence and status
// (runtime_commands.cpp: commands and answers; runtime_plan.cpp: ticks, plans, migrations).

#include "generation/deployment_runtime.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "generation/layout.hpp"

namespace loom {

namespace {

constexpr size_t recent_decisions = 16;

} // namespace

deployment_runtime::deployment_runtime(const engine_model& engine, deployment_config config)
  : engine_(&engine), config_(std::move(config)), layout_config_(config_.initial) {}

// -- engines and layout ----------------------------------------------------------------------

std::optional<std::string> deployment_runtime::refusal(const engine_hello& h) const {
  if (h.gpus != config_.gpus_per_engine())
    return fmt::format("an engine of deployment '{}' is one node of {} GPUs, not {}",
                       config_.name, config_.gpus_per_engine(), h.gpus);
  if (knows(h.engine))
    return std::nullopt;
  int counted = 0;
  for (auto& [id, e] : engines_)
    counted += e.hello.gpus;
  if (counted + h.gpus > config_.gpus)
    return fmt::format("deployment '{}' has its {} GPUs served by {} engines", config_.name,
                       config_.gpus, engines_.size());
  return std::nullopt;
}

bool deployment_runtime::knows(const std::string& engine) const {
  return engines_.count(engine) > 0;
}

void deployment_runtime::join(const engine_hello& h, double now) {
  if (h.restarted && knows(h.engine))
    lose(h.engine, "its process restarted", now);
  if (auto it = engines_.find(h.engine); it != engines_.end()) {
    // Back after a restart of either side: what it carries is as the record says. Commands
    // it may have missed go again (it answers a repeat as it did the first time).
    it->second.alive = true;
    it->second.seen = now;
    it->second.hello.data_address = h.data_address;
    for (auto& [id, c] : commands_)
      if (c.pending.command.engine == h.engine)
        outbox_.push_back(c.pending.command);
    return;
  }
  engines_[h.engine] = {h, true, now};
  note(fmt::format("engine {} joined ({} GPUs{})", h.engine, h.gpus,
                   h.node.empty() ? "" : " on " + h.node));
  if (phase_ == reconfig_phase::none)
    extend_layout(now);
}

std::vector<std::string> deployment_runtime::idle_engines() const {
  std::set<std::string> busy;
  for (auto& [k, inst] : instances_)
    busy.insert(inst.engines.begin(), inst.engines.end());
  std::vector<std::string> out;
  for (auto& [id, e] : engines_)
    if (e.alive && !busy.count(id))
      out.push_back(id);
  return out;
}

void deployment_runtime::extend_layout(double now) {
  std::vector<engine_slot> idle;
  for (auto& id : idle_engines())
    idle.push_back({id, engines_.at(id).hello.gpus});
  auto slots = lay_out(layout_config_, idle, next_instance_);
  if (slots.empty())
    return;
  if (epoch_ == 0)
    epoch_ = 1;
  for (auto& s : slots) {
    instances_[s.instance] = instance_entry{s.engines, s.config};
    next_instance_ = std::max(next_instance_, s.instance + 1);
  }
  for (auto& e : idle) {
    auto carried = carried_by(slots, e.engine);
    if (carried.empty())
      continue;
    gen_command c;
    c.engine = e.engine;
    c.kind = gen_command_kind::reshard;
    c.epoch = epoch_;
    c.config = layout_config_;
    c.slots = std::move(carried);
    c.peers = peers_of(c.slots);
    send(std::move(c), now);
  }
}

void deployment_runtime::lose(const std::string& engine, const std::string& why, double now) {
  if (!engines_.erase(engine))
    return;
  ++counters_.engines_lost;
  note(fmt::format("engine {} lost: {}", engine, why));
  gen_record r;
  r.kind = gen_record_kind::engine_lost;
  r.detail = fmt::format("{}: {}", engine, why);
  emit(std::move(r), now);
  forget_commands_to(engine);
  drop_instances_of(engine, now);
  advance_phase(now); // it may have been the engine a phase waited for
  if (phase_ == reconfig_phase::none)
    extend_layout(now);
  maybe_apply_pending(now);
}

void deployment_runtime::drop_instances_of(const std::string& engine, double now) {
  std::set<uint32_t> gone;
  for (auto it = instances_.begin(); it != instances_.end();) {
    auto& e = it->second.engines;
    if (std::find(e.begin(), e.end(), engine) != e.end()) {
      gone.insert(it->first);
      it = instances_.erase(it);
    } else {
      ++it;
    }
  }
  // What ran there is gone with the engine: those requests start again from their prompts.
  for (auto& r : requests_) {
    bool lost = (r.where == place::on_instance || r.where == place::moving)
                && gone.count(r.instance);
    if (!lost)
      continue;
    set_place(r, place::unplaced);
    r.generated = 0;
    r.kv_resident = false;
  }
  for (auto it = assignment_.begin(); it != assignment_.end();)
    it = gone.count(it->second) ? assignment_.erase(it) : std::next(it);
  (void)now;
}

std::vector<uint32_t> deployment_runtime::serving_ids(bool all) const {
  std::vector<uint32_t> out;
  std::vector<uint32_t> latency;
  for (auto& [k, inst] : instances_)
    if (inst.serving || all)
      (inst.config == layout_config_ ? out : latency).push_back(k);
  out.insert(out.end(), latency.begin(), latency.end());
  return out;
}

gen_deployment deployment_runtime::deployment_of(const std::vector<uint32_t>& ids) const {
  gen_deployment d{layout_config_, 0};
  for (auto k : ids) {
    const auto& config = instances_.at(k).config;
    if (config == layout_config_) {
      ++d.instances;
    } else {
      d.latency = config;
      ++d.latency_instances;
    }
  }
  return d;
}

bool deployment_runtime::leads(const std::string& engine) const {
  return std::any_of(instances_.begin(), instances_.end(),
                     [&](auto& i) { return i.second.engines.front() == engine; });
}

std::optional<step_outcome> deployment_runtime::abort_step(const std::string& why, double now) {
  if (!step_)
    return std::nullopt;
  // The engines let the step's requests go, as a migration's source does; their answers
  // change nothing (the commands are not tracked), so a lost one costs nothing.
  std::map<uint32_t, gen_command> releases;
  for (auto& r : requests_) {
    const bool held_there = r.where == place::on_instance || r.where == place::moving;
    if (held_there && instances_.count(r.instance)) {
      auto& c = releases[r.instance];
      c.kind = gen_command_kind::migrate;
      c.engine = instances_.at(r.instance).engines.front();
      c.epoch = epoch_;
      c.moves.push_back({r.id, r.instance, r.instance, false});
    }
  }
  for (auto& [instance, c] : releases) {
    c.id = next_command_++;
    outbox_.push_back(std::move(c));
  }
  const auto unfinished_n = unfinished();
  last_done_ = done_step{*step_, last_finished_at_ns_, requests_.size(), why};
  note(fmt::format("aborted with {} of {} requests unfinished: {}", unfinished_n,
                   requests_.size(), why));
  gen_record r;
  r.kind = gen_record_kind::step_aborted;
  r.pending = int64_t(unfinished_n);
  r.detail = why;
  emit(std::move(r), now);
  auto outcome = done_outcome(*step_);
  step_.reset();
  held_.clear();
  dirty_ = true;
  return outcome;
}


std::vector<parallel_config> deployment_runtime::standby() const {
  std::vector<parallel_config> common;
  bool first = true;
  for (auto& entry : engines_) {
    const auto& configs = entry.second.ran; // no structured binding: clang 14 cannot capture one
    if (!entry.second.alive)
      continue;
    if (std::exchange(first, false))
      common = configs;
    else
      std::erase_if(common, [&](auto& c) {
        return std::find(configs.begin(), configs.end(), c) == configs.end();
      });
  }
  return common;
}

void deployment_runtime::ran(const std::string& engine, const parallel_config& c) {
  auto it = engines_.find(engine);
  if (it != engines_.end() && std::find(it->second.ran.begin(), it->second.ran.end(), c)
                                == it->second.ran.end())
    it->second.ran.push_back(c);
}

double deployment_runtime::gpu_budget() const {
  int gpus = 0;
  for (auto& [id, e] : engines_)
    if (e.alive)
      gpus += e.hello.gpus;
  return std::min(gpus, config_.gpus);
}

gen_deployment deployment_runtime::serving() const {
  return deployment_of(serving_ids(true));
}

bool deployment_runtime::on_stats(const instance_stats& s, double now) {
  auto e = engines_.find(s.engine);
  if (e == engines_.end() || !e->second.alive)
    return true;
  e->second.seen = now;
  if (s.requests.size() > requests_.size())
    return false;
  auto it = instances_.find(s.instance);
  if (s.epoch != epoch_ || it == instances_.end() || it->second.engines.front() != s.engine
      || !it->second.serving)
    return true; // a layout that is gone, or one not serving yet
  auto& inst = it->second;
  step_preemptions_ += std::max<int64_t>(0, s.preemptions - inst.preemptions_seen);
  inst.preemptions_seen = s.preemptions;
  inst.stats = s;
  inst.pace.observe(s.decode_rate_tps);
  inst.fresh = true;
  inst.reported = now;
  if (!step_)
    return true;
  for (auto& q : s.requests) {
    auto* r = find(q.id);
    if (!r || r->where == place::finished)
      continue;
    r->generated = q.generated;
    r->kv_resident = q.kv_resident;
    // The engine's word is the truth of where a request is, once nothing moves it.
    if (r->where == place::unknown || r->where == place::on_instance) {
      set_place(*r, place::on_instance);
      r->instance = s.instance;
    }
  }
  return true;
}

// -- steps -------------------------------------------------------------------------------------

deployment_runtime::step_admission deployment_runtime::start_step(const step_batch& batch,
                                                                  double now) {
  if (step_ && *step_ == batch.step)
    return step_admission::current;
  if (last_done_ && batch.step <= last_done_->step)
    return step_admission::done;
  if (step_)
    return step_admission::busy;
  if (engines_.empty())
    return step_admission::no_engines;
  step_ = batch.step;
  step_address_ = batch.data_address;
  load_batch(batch.requests, place::unplaced, now);
  finished_since_.clear();
  last_finished_at_ns_ = 0;
  step_started_ = now;
  step_preemptions_ = 0;
  placed_ = false;
  round_robin_ = 0;
  next_plan_at_ = now + config_.period_s;
  last_tick_ = now;
  dirty_ = true;
  gen_record r;
  r.kind = gen_record_kind::step_started;
  r.pending = unfinished();
  emit(std::move(r), now);
  return step_admission::started;
}

void deployment_runtime::load_batch(const std::vector<gen_pending>& batch, place where,
                                    double now) {
  requests_.clear();
  index_.clear();
  in_place_ = {};
  for (auto& p : batch) {
    if (index_.count(p.id))
      continue; // a repeated id counts once
    index_[p.id] = uint32_t(requests_.size());
    request r;
    r.id = p.id;
    r.prompt = p.prompt_tokens;
    r.where = where;
    r.unknown_since = now;
    requests_.push_back(r);
    ++in_place_[size_t(where)];
  }
}

deployment_runtime::request* deployment_runtime::find(uint64_t id) {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &requests_[it->second];
}

void deployment_runtime::set_place(request& r, place p) {
  --in_place_[size_t(r.where)];
  ++in_place_[size_t(p)];
  r.where = p;
}

std::optional<step_placement> deployment_runtime::placement() const {
  if (!step_ || !placed_)
    return std::nullopt;
  step_placement p;
  p.step = *step_;
  p.deployment = serving();
  p.reconfigured = phase_ != reconfig_phase::none;
  for (auto& r : requests_) {
    auto a = assignment_.find(r.id);
    uint32_t k = a != assignment_.end() ? a->second : r.instance;
    auto inst = instances_.find(k);
    bool placed = a != assignment_.end() || r.where == place::on_instance
                  || r.where == place::moving || r.where == place::finished;
    p.instances.push_back(k);
    p.engines.push_back(placed && inst != instances_.end() ? inst->second.engines.front() : "");
  }
  return p;
}

std::optional<step_outcome> deployment_runtime::done_outcome(uint64_t step) const {
  if (!last_done_ || last_done_->step != step)
    return std::nullopt;
  return step_outcome{config_.name, step, last_done_->at_ns, last_done_->requests,
                      !last_done_->aborted.empty(), last_done_->aborted};
}

std::optional<step_outcome> deployment_runtime::last_outcome() const {
  return last_done_ ? done_outcome(last_done_->step) : std::nullopt;
}

deployment_runtime::finished_result
deployment_runtime::on_finished(const requests_finished& f, double now) {
  finished_result out;
  if (last_done_ && f.step == last_done_->step)
    return out; // a repeat of what the last step counted (its answer was lost)
  if (!step_ || f.step != *step_) {
    out.refused = step_ ? fmt::format("step {} is not running (step {} is)", f.step, *step_)
                        : fmt::format("step {} is not running (no step is)", f.step);
    return out;
  }
  for (auto& d : f.done) {
    auto* r = find(d.id);
    if (!r) {
      out.refused = fmt::format("request {} is not in step {}", d.id, f.step);
      continue; // the rest of the report still counts
    }
    if (r->where == place::finished)
      continue;
    // An engine ends only its own requests: another's finish would end a step early and
    // skew the length forecast the planner acts on.
    if (!runs_on(*r, f.engine)) {
      out.refused = fmt::format("request {} does not run on engine {}", d.id, f.engine);
      continue;
    }
    set_place(*r, place::finished);
    r->output = d.output_tokens;
    held_.erase(d.id);
    finished_since_.push_back(d.output_tokens);
    last_finished_at_ns_ = std::max(last_finished_at_ns_, d.finished_at_ns);
    out.fresh.push_back(d);
  }
  if (unfinished() > 0 || out.fresh.empty())
    return out;
  last_done_ = done_step{*step_, last_finished_at_ns_, requests_.size()};
  out.step_done = step_outcome{config_.name, *step_, last_finished_at_ns_,
                               uint64_t(requests_.size())};
  note(fmt::format("done: {} requests in {:.1f} s", requests_.size(), step_s(now)));
  gen_record r;
  r.kind = gen_record_kind::step_done;
  r.preemptions = step_preemptions_;
  emit(std::move(r), now);
  step_.reset();
  dirty_ = true;
  return out;
}

bool deployment_runtime::runs_on(const request& r, const std::string& engine) const {
  if (!engines_.count(engine))
    return false; // lost, or never registered
  auto serves = [&](uint32_t instance) {
    auto it = instances_.find(instance);
    return it != instances_.end()
           && std::find(it->second.engines.begin(), it->second.engines.end(), engine)
                != it->second.engines.end();
  };
  switch (r.where) {
    case place::on_instance: return serves(r.instance);
    case place::moving: return serves(r.instance) || serves(r.to);
    case place::held: {
      auto h = held_.find(r.id);
      return (h != held_.end() && h->second.kv_source == engine) || serves(r.instance);
    }
    case place::unknown: return true; // its report is how the runtime learns where it was
    default: return false;
  }
}

std::vector<request_done> deployment_runtime::step_outputs() const {
  std::vector<request_done> out;
  for (auto& r : requests_)
    if (r.where == place::finished)
      out.push_back({r.id, r.output, 0});
  return out;
}

// -- what the caller takes ---------------------------------------------------------------------

std::vector<gen_command> deployment_runtime::take_commands() {
  std::vector<gen_command> out;
  out.swap(outbox_);
  return out;
}

std::vector<gen_record> deployment_runtime::take_records() {
  std::vector<gen_record> out;
  out.swap(records_);
  return out;
}

bool deployment_runtime::take_dirty() {
  return std::exchange(dirty_, false);
}

void deployment_runtime::note(std::string text) {
  recent_.push_back(step_ ? fmt::format("step {}: {}", *step_, text) : std::move(text));
  if (recent_.size() > recent_decisions)
    recent_.erase(recent_.begin());
  dirty_ = true;
}

void deployment_runtime::emit(gen_record r, double now) {
  r.deployment = config_.name;
  r.step = step_ ? *step_ : (last_done_ ? last_done_->step : 0);
  r.step_s = step_s(now);
  records_.push_back(std::move(r));
}

// -- persistence and status ----------------------------------------------------------------------

deployment_record deployment_runtime::record() const {
  deployment_record r;
  r.epoch = epoch_;
  r.config = layout_config_;
  for (auto& [k, inst] : instances_)
    r.instances.push_back({k, inst.engines, inst.config});
  r.next_instance = next_instance_;
  for (auto& [id, e] : engines_)
    r.engines.push_back(e.hello);
  r.step = step_.value_or(0);
  r.step_active = step_.has_value();
  if (last_done_) {
    r.any_done = true;
    r.last_done_step = last_done_->step;
    r.last_done_at_ns = last_done_->at_ns;
    r.last_done_requests = last_done_->requests;
    r.last_done_aborted = last_done_->aborted;
  }
  r.next_command = next_command_;
  for (auto& [id, c] : commands_)
    r.commands.push_back(c.pending);
  r.phase = phase_;
  r.reconfig_from = reconfig_from_;
  r.assignment.assign(assignment_.begin(), assignment_.end());
  for (auto& [id, h] : held_)
    r.held.push_back(h);
  r.counters = counters_;
  r.recent = recent_;
  return r;
}

std::optional<step_record> deployment_runtime::current_step() const {
  if (!step_)
    return std::nullopt;
  step_record s;
  s.step = *step_;
  s.data_address = step_address_;
  for (auto& r : requests_)
    s.requests.push_back({r.id, r.prompt, 0, -1});
  return s;
}

void deployment_runtime::restore(const deployment_record& r, const std::optional<step_record>& step,
                                 const std::vector<request_done>& finished, double now) {
  epoch_ = r.epoch;
  layout_config_ = r.config;
  next_instance_ = r.next_instance;
  const bool serving = r.phase == reconfig_phase::none || r.phase == reconfig_phase::admitting;
  for (auto& s : r.instances)
    instances_[s.instance] = instance_entry{s.engines, s.config, serving};
  for (auto& e : r.engines)
    engines_[e.engine] = {e, false, now}; // away until it registers again
  for (auto& s : r.instances)
    for (auto& e : s.engines)
      ran(e, s.config);
  if (r.any_done)
    last_done_ = done_step{r.last_done_step, r.last_done_at_ns, r.last_done_requests,
                           r.last_done_aborted};
  next_command_ = r.next_command;
  // Deadlines start over: engines get their commands again when they register.
  const double grace = config_.command_timeout_s * (config_.command_retries + 1);
  for (auto& c : r.commands)
    commands_[c.command.id] = {c, now + grace};
  phase_ = r.phase;
  reconfig_from_ = r.reconfig_from;
  assignment_.insert(r.assignment.begin(), r.assignment.end());
  for (auto& h : r.held)
    held_[h.id] = h;
  counters_ = r.counters;
  recent_ = r.recent;
  if (!r.step_active || !step || step->step != r.step)
    return;
  step_ = r.step;
  step_address_ = step->data_address;
  step_started_ = now;
  last_tick_ = now;
  next_plan_at_ = now + config_.period_s;
  placed_ = true;
  load_batch(step->requests, place::unknown, now); // where the engines say, once they report
  for (auto& h : r.held)
    if (auto* q = find(h.id)) {
      set_place(*q, place::held);
      q->generated = h.generated;
    }
  for (auto& c : r.commands) // requests travelling in an admit are where it puts them
    if (c.command.kind == gen_command_kind::admit)
      for (auto& a : c.command.requests)
        if (auto* q = find(a.id)) {
          set_place(*q, place::on_instance);
          q->instance = c.command.instance;
          q->generated = a.generated;
        }
  for (auto& d : finished)
    if (auto* q = find(d.id); q && q->where != place::finished) {
      set_place(*q, place::finished);
      q->output = d.output_tokens;
      last_finished_at_ns_ = std::max(last_finished_at_ns_, d.finished_at_ns);
    }
}

gen_status deployment_runtime::status() const {
  gen_status s;
  s.deployment = config_.name;
  s.model = config_.model;
  s.gpus = config_.gpus;
  s.current = serving();
  s.epoch = epoch_;
  for (auto& [id, e] : engines_)
    s.engines.push_back(fmt::format("{} ({}{} GPUs{})", id,
                                    e.hello.node.empty() ? "" : e.hello.node + ", ", e.hello.gpus,
                                    e.alive ? "" : ", away"));
  for (auto& [k, inst] : instances_)
    s.instances.push_back({k, inst.engines, inst.config});
  s.step = step_ ? *step_ : (last_done_ ? last_done_->step : 0);
  s.step_active = step_.has_value();
  s.pending = step_ ? unfinished() : 0;
  s.finished = step_ ? count(place::finished)
                     : (last_done_ ? int64_t(last_done_->requests) : 0);
  if (phase_ != reconfig_phase::none)
    s.phase = std::string{to_string(phase_)};
  s.forecast_mean_tokens = forecast_mean_tokens_;
  s.recent = recent_;
  s.counters = counters_;
  s.last_solve_ms = last_solve_ms_;
  return s;
}

} // namespace loom
