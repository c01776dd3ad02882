// The deployment runtime's Alg. 1: monitoring ticks, the planner's snapshots and decisions
// (Event 1: keep and place, or reconfigure), the balancer's loads and migrations (Event 2),
// and placing requests that have no instance.

#include <algorithm>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "generation/deployment_runtime.hpp"
#include "generation/kv_migration.hpp"
#include "generation/layout.hpp"

namespace loom {

bool deployment_runtime::tick_due(double now) const {
  if (!step_ || phase_ != reconfig_phase::none || balancing_)
    return false;
  bool any = false;
  bool all = true;
  for (auto& [k, inst] : instances_) {
    if (!inst.serving)
      continue;
    any |= inst.fresh;
    all &= inst.fresh;
  }
  return any && (all || now >= last_tick_ + 2 * config_.tick_s);
}

deployment_runtime::tick_work deployment_runtime::tick(double now) {
  tick_work work;
  last_tick_ = now;
  resolve_unknown(now);
  gen_record progress;
  progress.kind = gen_record_kind::progress;
  progress.pending = unfinished();
  emit(std::move(progress), now);
  balance_instances_.clear();
  std::vector<gen_worker> loads;
  for (auto& [k, inst] : instances_) {
    if (!inst.serving || !inst.fresh || !inst.stats)
      continue;
    inst.fresh = false;
    gen_worker w;
    w.id = uint32_t(balance_instances_.size());
    balance_instances_.push_back(k);
    for (auto& q : inst.stats->requests) {
      auto* r = find(q.id);
      if (!r || r->where != place::on_instance || r->instance != k)
        continue; // moving, finished, or not this step's
      const int64_t context = q.prompt_tokens + q.generated;
      const auto move = q.running ? kv_move_cost_of(*engine_, inst.config, 1, context,
                                                    config_.planner.kv_path)
                                  : kv_move_cost{};
      (q.running ? w.running : w.waiting).push_back({q.id, context, false, q.generated, move});
    }
    w.kv_free_tokens = inst.stats->kv_free_tokens;
    w.max_batch = inst.stats->max_batch;
    w.decode_rate_tps = inst.stats->decode_rate_tps;
    w.pace_tps = inst.pace.mean_tps();
    w.rate_spread_tps = inst.pace.spread_tps();
    w.peak_tps = inst.pace.peak_tps();
    loads.push_back(std::move(w));
  }
  if (config_.planner_enabled && !planning_ && placed_ && now >= next_plan_at_
      && !pending_decision_ && !serving_ids().empty())
    work.plan = make_snapshot(now);
  // The balancer waits while the planner decides: a switch would undo its moves, and a kept
  // deployment gets the planner's own placement (measured on gen-kv-pressure: orchestr's
  // worst seed 0.946x static-best with both at once, 1.015x without).
  if (config_.balancer_enabled && loads.size() >= 2 && !pending_decision_ && !work.plan
      && !planning_) {
    balancing_ = true;
    work.balance = std::move(loads);
  }
  return work;
}

void deployment_runtime::resolve_unknown(double now) {
  // Every serving instance has reported since the request went missing, and none has it:
  // it is gone (its engine died, or the service restarted while it moved). It starts again.
  if (count(place::unknown) == 0)
    return;
  double oldest = std::numeric_limits<double>::infinity();
  for (auto& [k, inst] : instances_)
    if (inst.serving)
      oldest = std::min(oldest, inst.reported);
  for (auto& r : requests_)
    if (r.where == place::unknown && oldest > r.unknown_since) {
      set_place(r, place::unplaced);
      r.generated = 0;
      r.kv_resident = false;
    }
  (void)now;
}

void deployment_runtime::on_migrations(const std::vector<migration>& moves, double now) {
  balancing_ = false;
  if (!step_ || phase_ != reconfig_phase::none)
    return;
  std::map<std::string, std::vector<migration>> per_source;
  for (auto& m : moves) {
    if (m.from >= balance_instances_.size() || m.to >= balance_instances_.size())
      continue;
    const auto from = balance_instances_[m.from];
    const auto to = balance_instances_[m.to];
    auto* r = find(m.request);
    auto src = instances_.find(from);
    auto dst = instances_.find(to);
    if (!r || r->where != place::on_instance || r->instance != from || src == instances_.end()
        || dst == instances_.end() || !dst->second.serving)
      continue; // it moved, finished or lost its instance since the loads were taken
    set_place(*r, place::moving);
    r->to = to;
    per_source[src->second.engines.front()].push_back({m.request, from, to, m.was_waiting});
  }
  for (auto& [engine, list] : per_source) {
    gen_command c;
    c.engine = engine;
    c.kind = gen_command_kind::migrate;
    c.epoch = epoch_;
    c.moves = std::move(list);
    send(std::move(c), now);
  }
}

bool deployment_runtime::has_unplaced() const {
  return count(place::unplaced) > 0;
}

std::optional<gen_snapshot> deployment_runtime::plan_now(double now) {
  if (!step_ || phase_ != reconfig_phase::none || pending_decision_ || planning_)
    return std::nullopt;
  auto ids = serving_ids();
  if (ids.empty() || ids.size() != instances_.size())
    return std::nullopt; // instances still loading: place once they serve
  if (!has_unplaced())
    return std::nullopt;
  if (!config_.planner_enabled) {
    place_as_dispatched(now);
    return std::nullopt;
  }
  return make_snapshot(now);
}

gen_snapshot deployment_runtime::make_snapshot(double now) {
  gen_snapshot s;
  s.step = *step_;
  snapshot_instances_ = serving_ids();
  s.deployment = deployment_of(snapshot_instances_);
  s.gpu_budget = int(gpu_budget());
  s.standby = standby();
  std::map<uint32_t, int32_t> index;
  for (size_t i = 0; i < snapshot_instances_.size(); ++i)
    index[snapshot_instances_[i]] = int32_t(i);
  snapshot_ids_.clear();
  for (auto& r : requests_) {
    if (r.where == place::finished)
      continue;
    int32_t k = -1;
    if (r.where == place::on_instance || r.where == place::moving) {
      auto it = index.find(r.where == place::moving ? r.to : r.instance);
      k = it == index.end() ? -1 : it->second;
    }
    s.pending.push_back({r.id, r.prompt, r.generated, k});
    snapshot_ids_.push_back(r.id);
  }
  s.finished_outputs = std::move(finished_since_);
  finished_since_.clear();
  snapshot_epoch_ = epoch_;
  snapshot_between_steps_ = false;
  planning_ = true;
  next_plan_at_ = now + config_.period_s;
  return s;
}

std::optional<gen_snapshot> deployment_runtime::next_step_snapshot() {
  if (!config_.planner_enabled || step_ || !last_done_ || phase_ != reconfig_phase::none
      || planning_ || pending_decision_)
    return std::nullopt;
  const auto ids = serving_ids();
  if (ids.empty())
    return std::nullopt;
  gen_snapshot s;
  s.step = last_done_->step + 1;
  s.deployment = deployment_of(ids);
  s.gpu_budget = int(gpu_budget());
  s.standby = standby();
  for (auto& r : requests_)
    s.pending.push_back({r.id, r.prompt, 0, -1});
  snapshot_ids_.clear();
  snapshot_instances_.clear();
  finished_since_.clear(); // the planner learned the step's lengths whole
  snapshot_epoch_ = epoch_;
  snapshot_between_steps_ = true;
  planning_ = true;
  return s;
}

void deployment_runtime::on_decision(const gen_decision& d, double now) {
  planning_ = false;
  last_solve_ms_ = d.solve_ms;
  forecast_mean_tokens_ = d.forecast_mean_tokens;
  gen_record rec;
  rec.kind = gen_record_kind::planned;
  rec.reconfigure = d.reconfigure;
  rec.solve_ms = d.solve_ms;
  emit(std::move(rec), now);
  if (std::exchange(snapshot_between_steps_, false)) {
    // Set up now what the next batch wants; a batch that came meanwhile is planned as usual.
    if (d.reconfigure && !step_ && snapshot_epoch_ == epoch_ && phase_ == reconfig_phase::none)
      begin_reconfiguration(d, now);
    return;
  }
  if (!step_ || snapshot_epoch_ != epoch_ || phase_ != reconfig_phase::none)
    return; // the layout changed under the plan: the next one decides
  if (d.reconfigure) {
    pending_decision_ = d;
    decision_epoch_ = epoch_;
    maybe_apply_pending(now);
    return;
  }
  // Kept: requests without an instance (a new batch, or re-placed) go where the plan put them.
  std::map<uint32_t, std::vector<admitted_request>> per;
  for (size_t i = 0; i < snapshot_ids_.size() && i < d.assignment.size(); ++i) {
    auto& r = *find(snapshot_ids_[i]);
    auto k = d.assignment[i];
    if (r.where != place::unplaced || k < 0 || size_t(k) >= snapshot_instances_.size())
      continue;
    auto inst = snapshot_instances_[size_t(k)];
    if (!instances_.count(inst) || !instances_.at(inst).serving)
      continue;
    per[inst].push_back({snapshot_ids_[i], r.prompt, r.generated, false, {}});
  }
  for (auto& [k, list] : per)
    admit_to(k, std::move(list), false, now);
  placed_ = true;
}

void deployment_runtime::maybe_apply_pending(double now) {
  if (!pending_decision_ || awaiting(gen_command_kind::migrate)
      || awaiting(gen_command_kind::admit) || phase_ != reconfig_phase::none)
    return;
  auto d = std::move(*pending_decision_);
  pending_decision_.reset();
  if (decision_epoch_ == epoch_ && step_)
    begin_reconfiguration(d, now);
}

std::optional<std::string> deployment_runtime::force_layout(const parallel_config& layout,
                                                            double now) {
  if (phase_ != reconfig_phase::none || pending_decision_)
    return std::string{"a reconfiguration is under way"};
  std::vector<engine_slot> alive;
  for (auto& [id, e] : engines_)
    if (e.alive)
      alive.push_back({id, e.hello.gpus});
  gen_decision d;
  d.reconfigure = true;
  d.deployment.parallel = layout;
  d.deployment.instances = int(lay_out(layout, alive, 0).size());
  if (d.deployment.instances == 0)
    return fmt::format("no {} instance fits the engines registered", layout.name());
  if (d.deployment == serving())
    return fmt::format("it already serves {}", d.deployment.name());
  note(fmt::format("an operator asked for {}", d.deployment.name()));
  if (!step_) {
    begin_reconfiguration(d, now);
    return std::nullopt;
  }
  pending_decision_ = std::move(d);
  decision_epoch_ = epoch_;
  maybe_apply_pending(now);
  return std::nullopt;
}

void deployment_runtime::begin_reconfiguration(const gen_decision& d, double now) {
  std::vector<engine_slot> alive;
  for (auto& [id, e] : engines_)
    if (e.alive)
      alive.push_back({id, e.hello.gpus});
  auto slots = lay_out(d.deployment, alive);
  if (int(slots.size()) != d.deployment.size()) {
    note(fmt::format("plan {} dropped: the engines carry {} such instances", d.deployment.name(),
                     slots.size()));
    return;
  }
  reconfig_from_ = serving().name();
  ++epoch_;
  layout_config_ = d.deployment.parallel;
  instances_.clear();
  for (auto& s : slots)
    instances_[s.instance] = instance_entry{s.engines, s.config};
  next_instance_ = uint32_t(slots.size());
  assignment_.clear();
  for (size_t i = 0; i < snapshot_ids_.size() && i < d.assignment.size(); ++i)
    if (d.assignment[i] >= 0 && size_t(d.assignment[i]) < slots.size())
      assignment_[snapshot_ids_[i]] = slots[size_t(d.assignment[i])].instance;
  held_.clear();
  phase_ = reconfig_phase::draining;
  ++counters_.reconfigurations;
  placed_ = true;
  note(fmt::format("reconfigure {} -> {} (layout {}): objective {:.1f} s vs {:.1f} s, switch "
                   "{:.1f} s, migrate {:.1f} s",
                   reconfig_from_, d.deployment.name(), epoch_, d.objective_s, d.current_s,
                   d.switch_s, d.migrate_s));
  gen_record r;
  r.kind = gen_record_kind::reconfigured;
  r.detail = fmt::format("{} -> {}", reconfig_from_, d.deployment.name());
  switching_ = switch_clock{now, d.switch_s + d.migrate_s, 0, r.detail};
  emit(std::move(r), now);
  gen_command drain;
  drain.kind = gen_command_kind::drain;
  drain.epoch = epoch_;
  drain.config = layout_config_; // what comes after it
  command_engines(drain, now);
  advance_phase(now); // no engine to wait for
}

void deployment_runtime::place_as_dispatched(double now) {
  auto ids = serving_ids();
  if (ids.empty())
    return;
  std::vector<const request*> unplaced;
  for (auto& r : requests_)
    if (r.where == place::unplaced)
      unplaced.push_back(&r);
  std::map<uint32_t, std::vector<admitted_request>> per;
  for (size_t i = 0; i < unplaced.size(); ++i) {
    const size_t k = config_.dispatch == dispatch_mode::contiguous
                       ? i * ids.size() / unplaced.size()
                       : round_robin_++ % ids.size();
    auto& r = *unplaced[i];
    per[ids[k]].push_back({r.id, r.prompt, r.generated, false, {}});
  }
  for (auto& [k, list] : per)
    admit_to(k, std::move(list), false, now);
  placed_ = true;
}

} // namespace loom
