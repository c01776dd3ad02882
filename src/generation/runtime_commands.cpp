// The deployment runtime's commands: sending them with deadlines, the engines' answers, the
// phases of a reconfiguration, and what happens when an engine does not answer in time.

#include <algorithm>

#include <fmt/format.h>

#include "generation/deployment_runtime.hpp"
#include "generation/kv_migration.hpp"
#include "generation/layout.hpp"

namespace loom {

void deployment_runtime::command_engines(const gen_command& c, double now) {
  for (auto& [id, e] : engines_) {
    if (!e.alive)
      continue;
    auto mine = c;
    mine.engine = id;
    if (c.kind == gen_command_kind::reshard) {
      mine.slots = carried_by(c.slots, id);
      mine.peers = peers_of(mine.slots);
    }
    send(std::move(mine), now);
  }
}

std::vector<engine_hello>
deployment_runtime::peers_of(const std::vector<instance_slot>& slots) const {
  std::vector<engine_hello> out;
  for (auto& s : slots)
    for (auto& e : s.engines)
      if (auto it = engines_.find(e); s.engines.size() > 1 && it != engines_.end()
          && std::none_of(out.begin(), out.end(), [&](auto& p) { return p.engine == e; }))
        out.push_back(it->second.hello);
  return out;
}

uint64_t deployment_runtime::send(gen_command c, double now) {
  c.id = next_command_++;
  const double timeout = c.kind == gen_command_kind::reshard ? config_.reshard_timeout_s
                                                              : config_.command_timeout_s;
  commands_[c.id] = {{c, 1}, now + timeout};
  outbox_.push_back(std::move(c));
  dirty_ = true;
  return commands_.rbegin()->first;
}

void deployment_runtime::forget_commands_to(const std::string& engine) {
  for (auto it = commands_.begin(); it != commands_.end();) {
    if (it->second.pending.command.engine != engine) {
      ++it;
      continue;
    }
    // What an admit carried has nowhere to go now: it is placed again, progress kept.
    for (auto& a : it->second.pending.command.requests)
      if (auto* r = find(a.id); r && r->where != place::finished) {
        set_place(*r, place::unplaced);
        r->generated = a.generated;
        r->kv_resident = false;
      }
    it = commands_.erase(it);
  }
}

bool deployment_runtime::awaiting(gen_command_kind kind) const {
  return std::any_of(commands_.begin(), commands_.end(),
                     [&](auto& c) { return c.second.pending.command.kind == kind; });
}

void deployment_runtime::on_ack(const command_ack& a, double now) {
  auto it = commands_.find(a.command);
  if (it == commands_.end() || it->second.pending.command.engine != a.engine)
    return; // a repeat, or an answer to a command given up on
  auto sent = std::move(it->second.pending.command);
  commands_.erase(it); // lazily durable: a repeat after a restart is answered as before
  if (auto e = engines_.find(a.engine); e != engines_.end())
    e->second.seen = now;
  switch (sent.kind) {
    case gen_command_kind::drain: on_drain_ack(a); break;
    case gen_command_kind::reshard: on_reshard_ack(a, sent); break;
    case gen_command_kind::admit: on_admit_ack(a, sent, now); break;
    case gen_command_kind::migrate: on_migrate_ack(a, sent, now); break;
  }
  advance_phase(now);
  maybe_apply_pending(now);
}

void deployment_runtime::on_drain_ack(const command_ack& a) {
  for (auto& s : a.released) {
    auto* r = find(s.id);
    if (!r || r->where == place::finished)
      continue;
    set_place(*r, place::held);
    r->generated = s.generated;
    r->kv_resident = s.kv_resident;
    held_[s.id] = {s.id, s.prompt_tokens, s.generated, s.kv_resident, a.engine};
  }
}

void deployment_runtime::on_reshard_ack(const command_ack& a, const gen_command& sent) {
  if (a.ok)
    for (auto& s : sent.slots)
      ran(sent.engine, s.config);
  // An instance serves once every engine carrying it has loaded its shards.
  std::set<std::string> loading;
  for (auto& [id, c] : commands_)
    if (c.pending.command.kind == gen_command_kind::reshard)
      loading.insert(c.pending.command.engine);
  for (auto& s : sent.slots)
    if (auto it = instances_.find(s.instance); it != instances_.end()
        && phase_ == reconfig_phase::none
        && std::none_of(it->second.engines.begin(), it->second.engines.end(),
                        [&](auto& e) { return loading.count(e); }))
      it->second.serving = true;
}

void deployment_runtime::on_admit_ack(const command_ack& a, const gen_command& sent, double now) {
  if (a.ok)
    return;
  note(fmt::format("engine {} refused admit {}: {}", a.engine, sent.id, a.detail));
  for (auto& q : sent.requests)
    if (auto* r = find(q.id);
        r && r->where == place::on_instance && r->instance == sent.instance) {
      set_place(*r, place::unplaced); // its state is the command's: recomputed elsewhere
      r->generated = q.generated;
      r->kv_resident = false;
    }
  (void)now;
}

admitted_request deployment_runtime::moved(uint64_t id, const request& r,
                                           const instance_entry& dst) {
  admitted_request a{id, r.prompt, r.generated, false, {}};
  if (!r.kv_resident)
    return a; // a waiting request: nothing to carry
  auto cost = kv_move_cost_of(*engine_, dst.config, 1, r.prompt + r.generated,
                              config_.planner.kv_path);
  // A recompute pauses the destination's running batch with it (kv_move_cost).
  int busy = 0;
  if (dst.stats)
    for (auto& q : dst.stats->requests)
      busy += q.running;
  a.kv_transfer = !cost.recompute(busy);
  ++(a.kv_transfer ? counters_.kv_transfers : counters_.kv_recomputes);
  return a;
}

void deployment_runtime::on_migrate_ack(const command_ack& a, const gen_command& sent,
                                        double now) {
  std::map<uint32_t, std::vector<admitted_request>> per;
  std::set<uint64_t> released;
  for (auto& s : a.released) {
    auto* found = find(s.id);
    if (!found || found->where == place::finished)
      continue;
    auto& r = *found;
    released.insert(s.id);
    r.generated = s.generated;
    r.kv_resident = s.kv_resident;
    auto dst = instances_.find(r.to);
    if (r.where != place::moving || dst == instances_.end() || !dst->second.serving) {
      set_place(r, place::unplaced); // its destination went away meanwhile
      r.kv_resident = false;
      continue;
    }
    auto m = moved(s.id, r, dst->second);
    m.kv_source = a.engine;
    ++counters_.migrations;
    gen_record rec;
    rec.kind = gen_record_kind::migrated;
    rec.mode = !r.kv_resident ? kv_mode::none : m.kv_transfer ? kv_mode::transfer
                                                              : kv_mode::recompute;
    emit(std::move(rec), now);
    per[r.to].push_back(std::move(m));
  }
  for (auto& m : sent.moves) // not released: it finished or left meanwhile
    if (auto* r = find(m.request);
        r && !released.count(m.request) && r->where == place::moving)
      set_place(*r, place::on_instance);
  for (auto& [k, list] : per)
    admit_to(k, std::move(list), false, now);
}

void deployment_runtime::admit_to(uint32_t instance, std::vector<admitted_request> requests,
                                  bool resume, double now) {
  auto it = instances_.find(instance);
  if (requests.empty() || it == instances_.end())
    return;
  for (auto& a : requests) {
    auto& r = *find(a.id);
    set_place(r, place::on_instance);
    r.instance = instance;
    r.generated = a.generated;
    r.kv_resident = a.kv_transfer;
    if (auto src = engines_.find(a.kv_source); src != engines_.end())
      a.source_address = src->second.hello.data_address;
  }
  gen_command c;
  c.engine = it->second.engines.front();
  c.kind = gen_command_kind::admit;
  c.epoch = epoch_;
  c.instance = instance;
  c.resume = resume;
  c.step = step_.value_or(0);
  c.router_address = step_address_;
  c.requests = std::move(requests);
  send(std::move(c), now);
}

void deployment_runtime::advance_phase(double now) {
  if (phase_ == reconfig_phase::draining && !awaiting(gen_command_kind::drain)) {
    // Whatever no engine released finished meanwhile (its report is on its way) or was lost
    // with its engine: the engines' reports will tell.
    for (auto& r : requests_)
      if (r.where == place::on_instance || r.where == place::moving) {
        set_place(r, place::unknown);
        r.unknown_since = now;
      }
    phase_ = reconfig_phase::resharding;
    gen_command reshard;
    reshard.kind = gen_command_kind::reshard;
    reshard.epoch = epoch_;
    reshard.config = layout_config_;
    for (auto& [k, inst] : instances_)
      reshard.slots.push_back({k, inst.engines, inst.config});
    command_engines(std::move(reshard), now);
  }
  if (phase_ == reconfig_phase::resharding && !awaiting(gen_command_kind::reshard)) {
    phase_ = reconfig_phase::admitting;
    for (auto& [k, inst] : instances_)
      inst.serving = true;
    admit_resumed(now);
  }
  if (phase_ == reconfig_phase::admitting && !awaiting(gen_command_kind::admit))
    finish_reconfiguration(now);
}

void deployment_runtime::admit_resumed(double now) {
  std::map<uint32_t, std::vector<uint64_t>> per;
  for (auto& [k, inst] : instances_)
    per[k];
  std::set<uint64_t> assigned;
  for (auto& [id, k] : assignment_) {
    auto* r = find(id);
    if (!r || !per.count(k))
      continue;
    auto w = r->where;
    if (w == place::held || w == place::unplaced || w == place::unknown) {
      per[k].push_back(id);
      assigned.insert(id);
    }
  }
  // Requests the plan did not place (it was made before they appeared): the emptiest.
  for (auto& r : requests_) {
    bool loose = r.where == place::held || r.where == place::unplaced;
    if (!loose || assigned.count(r.id) || per.empty())
      continue;
    auto k = std::min_element(per.begin(), per.end(), [](auto& a, auto& b) {
               return a.second.size() < b.second.size();
             })->first;
    per[k].push_back(r.id);
    placed_ = placed_ || step_.has_value(); // a batch that came during a switch between steps
  }
  for (auto& [k, ids] : per) {
    // C_mig (App. A): the KV moved onto an instance travels as one transfer, or is recomputed.
    int64_t sequences = 0;
    int64_t tokens = 0;
    for (auto id : ids)
      if (auto h = held_.find(id); h != held_.end() && h->second.kv_transfer) {
        ++sequences;
        tokens += h->second.prompt_tokens + h->second.generated;
      }
    kv_move_cost cost;
    if (sequences > 0)
      cost = kv_move_cost_of(*engine_, instances_.at(k).config, int(sequences),
                             tokens / sequences, config_.planner.kv_path);
    const bool recompute = sequences > 0 && cost.recompute();
    (recompute ? counters_.kv_recomputes : counters_.kv_transfers) += sequences;
    if (switching_) // the new instance starts after its moved KV (engine_sim::admit)
      switching_->kv_s = std::max(switching_->kv_s, cost.best_s());
    std::vector<admitted_request> list;
    for (auto id : ids) {
      auto& r = *find(id);
      admitted_request a{id, r.prompt, 0, false, {}};
      if (auto h = held_.find(id); h != held_.end()) {
        a = h->second;
        a.kv_transfer = a.kv_transfer && !recompute; // its tokens still come from kv_source
      }
      list.push_back(std::move(a));
    }
    admit_to(k, std::move(list), true, now);
  }
  held_.clear();
}

void deployment_runtime::finish_reconfiguration(double now) {
  phase_ = reconfig_phase::none;
  if (switching_) {
    gen_record r;
    r.kind = gen_record_kind::switched;
    r.detail = std::move(switching_->detail);
    r.switch_s = now - switching_->started;
    r.kv_s = switching_->kv_s;
    r.planned_s = switching_->planned_s;
    switching_.reset();
    emit(std::move(r), now);
  }
  assignment_.clear();
  held_.clear();
  note(fmt::format("layout {} serves: {}", epoch_, serving().name()));
  extend_layout(now); // engines that joined meanwhile
}

std::optional<step_outcome> deployment_runtime::expire(double now) {
  std::vector<uint64_t> due;
  for (auto& [id, c] : commands_)
    if (c.deadline <= now)
      due.push_back(id);
  for (auto id : due) {
    auto it = commands_.find(id);
    if (it == commands_.end())
      continue; // its engine was lost with an earlier one
    auto& c = it->second;
    const auto& cmd = c.pending.command;
    if (c.pending.attempts <= config_.command_retries) {
      ++c.pending.attempts;
      c.deadline = now + (cmd.kind == gen_command_kind::reshard ? config_.reshard_timeout_s
                                                                 : config_.command_timeout_s);
      ++counters_.commands_retried;
      outbox_.push_back(cmd);
      dirty_ = true;
      gen_record r;
      r.kind = gen_record_kind::command_retried;
      r.detail = fmt::format("{} {} to {}", cmd.kind, cmd.id, cmd.engine);
      emit(std::move(r), now);
      continue;
    }
    ++counters_.commands_abandoned;
    auto engine = cmd.engine;
    auto why = fmt::format("no answer to {} {} after {} attempts", cmd.kind, cmd.id,
                           c.pending.attempts);
    gen_record r;
    r.kind = gen_record_kind::command_abandoned;
    r.detail = fmt::format("{}: {}", engine, why);
    emit(std::move(r), now);
    lose(engine, why, now);
  }
  const double grace = config_.command_timeout_s * (config_.command_retries + 1);
  std::vector<std::pair<std::string, std::string>> gone;
  for (auto& [id, e] : engines_) {
    if (now - e.seen < grace)
      continue;
    if (!e.alive)
      gone.emplace_back(id, "did not register again after the service restarted");
    else if (step_ && leads(id)) // an instance's other engines report nothing (its leader does)
      gone.emplace_back(id, fmt::format("no stats for {:.1f} s", now - e.seen));
  }
  for (auto& [id, why] : gone)
    lose(id, why, now);
  if (step_ && now - step_started_ >= config_.step_timeout_s)
    return abort_step(fmt::format("not finished within step_timeout_s = {:g} s ({} of {} "
                                  "requests left)",
                                  config_.step_timeout_s, unfinished(), requests_.size()),
                      now);
  return std::nullopt;
}

std::optional<double> deployment_runtime::next_deadline() const {
  std::optional<double> out;
  auto earliest = [&](double t) { out = out ? std::min(*out, t) : t; };
  for (auto& [id, c] : commands_)
    earliest(c.deadline);
  const double grace = config_.command_timeout_s * (config_.command_retries + 1);
  for (auto& [id, e] : engines_)
    if (!e.alive || step_)
      earliest(e.seen + grace);
  if (step_)
    earliest(step_started_ + config_.step_timeout_s);
  if (step_ && std::any_of(instances_.begin(), instances_.end(),
                           [](auto& i) { return i.second.fresh; }))
    earliest(last_tick_ + 2 * config_.tick_s);
  return out;
}

} // namespace loom
