#include "scheduler/round_robin.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom {

int round_robin::running_rollout::total_held() const {
  int n = 0;
  for (auto& [node, d] : held)
    n += int(d.size());
  return n;
}

round_robin::round_robin(int gpus_per_rollout_node, int training_gpus, double tail_threshold,
                         bool migrate_tails)
  : gpus_per_node_(std::max(1, gpus_per_rollout_node)),
    training_gpus_(training_gpus),
    tail_threshold_(tail_threshold),
    migrate_tails_(migrate_tails) {}

void round_robin::name_nodes(std::shared_ptr<const std::vector<std::string>> rollout_names,
                             std::vector<node_devices> training_pool) {
  rollout_names_ = std::move(rollout_names);
  training_pool_ = std::move(training_pool);
}

round_robin::node_state& round_robin::node(int id) {
  auto [it, fresh] = nodes_.try_emplace(id);
  if (fresh) {
    it->second.free = gpus_per_node_;
    it->second.busy.assign(size_t(gpus_per_node_), false);
  }
  return it->second;
}

void round_robin::take(node_state& ns, int count, std::vector<int>& into) {
  for (size_t d = 0; d < ns.busy.size() && count > 0; ++d)
    if (!ns.busy[d]) {
      ns.busy[d] = true;
      into.push_back(int(d));
      --ns.free;
      --count;
    }
  std::sort(into.begin(), into.end()); // give() hands back the highest first
}

void round_robin::give(node_state& ns, std::vector<int>& from, size_t count) {
  for (; count > 0 && !from.empty(); --count) {
    ns.busy[size_t(from.back())] = false;
    from.pop_back();
    ++ns.free;
  }
}

std::string round_robin::node_name(int n) const {
  return rollout_names_ && size_t(n) < rollout_names_->size() ? (*rollout_names_)[size_t(n)]
                                                               : fmt::format("#{}", n);
}

std::vector<node_devices> round_robin::devices_of(const running_rollout& run) const {
  std::vector<node_devices> out;
  for (auto& [n, d] : run.held)
    if (!d.empty())
      out.push_back({node_name(n), d});
  return out;
}

std::map<int, int> round_robin::need_of(const member_state& m) const {
  std::map<int, int> need;
  int left = m.rollout_gpus;
  for (int n : m.rollout_nodes) {
    int take = std::min(left, gpus_per_node_);
    need[n] = take;
    left -= take;
  }
  return need;
}

bool round_robin::waiting(const std::string& job, phase_kind phase) const {
  auto it = members_.find(job);
  if (it == members_.end() || it->second.phase != phase)
    return false;
  return phase == phase_kind::rollout ? !rollouts_.count(job)
                                      : phase == phase_kind::training && training_running_ != job;
}

template <class Jobs, class Name, class Turn>
const std::string* round_robin::first_in_turn(const Jobs& jobs, Name name_of,
                                              Turn turn_of) const {
  const std::string* best = nullptr;
  turn best_turn{};
  for (auto& entry : jobs) {
    const std::string& job = name_of(entry);
    auto& m = members_.at(job);
    turn t{turn_of(m), m.position};
    if (!best || t < best_turn) {
      best = &job;
      best_turn = t;
    }
  }
  return best;
}

const std::string* round_robin::next_on_node(int n) const {
  auto it = nodes_.find(n);
  if (it == nodes_.end())
    return nullptr;
  return first_in_turn(
    it->second.pinned, [](const std::string& job) -> const std::string& { return job; },
    [](const member_state& m) { return m.rollout_turn; });
}

const std::string* round_robin::next_in_training() const {
  // A key projection, not std::views::keys: clang 14 (the fuzz build) cannot use libstdc++ 12's
  // ranges.
  return first_in_turn(
    members_, [](const auto& member) -> const std::string& { return member.first; },
    [](const member_state& m) { return m.training_turn; });
}

executor_actions round_robin::add(const group_member& m, phase_switches switches, bool staged,
                                   std::optional<turn_place> at) {
  const auto& job = m.job.id;
  if (members_.count(job))
    return {};
  // It joins at the end of the next round nobody has started a rollout in yet, so its first
  // phases slot in right behind the last member's, as in the steady state the planner
  // checked; joining the round in progress would push the others' next rollouts back.
  member_state state{m.rollout_nodes, m.job.rollout_gpus, switches, phase_kind::rollout,
                     next_position_, 0, 0};
  if (at) {
    // Its place from before the restart. Members' rounds differ by one at most, so one staged
    // after the others went on is brought to a round behind theirs: it takes one turn first,
    // not every turn it missed in a row.
    state.position = at->position;
    state.rollout_turn = at->round;
    if (!members_.empty()) {
      uint64_t least = UINT64_MAX;
      for (auto& [other, o] : members_)
        least = std::min(least, place_of(other)->round);
      state.rollout_turn = std::max(state.rollout_turn, least > 0 ? least - 1 : 0);
    }
  } else {
    for (auto& [other, o] : members_)
      state.rollout_turn = std::max(state.rollout_turn, o.rollout_turn);
  }
  next_position_ = std::max(next_position_, state.position + 1);
  state.training_turn = state.rollout_turn;
  for (int n : state.rollout_nodes) {
    auto& ns = node(n);
    ns.pinned.insert(job);
    if (staged)
      ns.resident.insert(job);
  }
  if (staged)
    training_resident_.insert(job);
  members_.emplace(job, std::move(state));
  return dispatch();
}

executor_actions round_robin::remove(const std::string& job) {
  if (!members_.count(job))
    return {};
  for (auto& [id, n] : nodes_) {
    n.pinned.erase(job);
    n.resident.erase(job);
  }
  if (auto it = rollouts_.find(job); it != rollouts_.end()) {
    for (auto& [n, d] : it->second.held)
      give(nodes_.at(n), d, d.size());
    rollouts_.erase(it);
  }
  training_resident_.erase(job);
  if (training_running_ == job)
    training_running_.reset();
  members_.erase(job);
  return dispatch();
}

executor_actions round_robin::phase_done(const std::string& job, phase_kind phase) {
  auto it = members_.find(job);
  if (it == members_.end() || it->second.phase != phase)
    return {};
  executor_actions out;
  switch (phase) {
    case phase_kind::rollout: {
      auto r = rollouts_.find(job);
      if (r == rollouts_.end())
        return {}; // not started: a stale report
      for (auto& [n, d] : r->second.held)
        give(nodes_.at(n), d, d.size());
      rollouts_.erase(r);
      it->second.phase = phase_kind::training;
      break;
    }
    case phase_kind::training:
      if (training_running_ != job)
        return {};
      training_running_.reset();
      // Sync needs no pool GPUs of its own (it streams over the link, WEAVE §5.2): it is
      // permitted at once and gates only this job's next rollout.
      it->second.phase = phase_kind::sync;
      out.grants.push_back(phase_grant{job, phase_kind::sync, 0, 0, false, 0, {}, {}});
      break;
    case phase_kind::sync:
      it->second.phase = phase_kind::rollout;
      break;
  }
  auto more = dispatch();
  out.grants.insert(out.grants.end(), more.grants.begin(), more.grants.end());
  out.resizes = std::move(more.resizes);
  return out;
}

executor_actions round_robin::tail_bound(const std::string& job) {
  auto r = rollouts_.find(job);
  if (!migrate_tails_ || r == rollouts_.end() || r->second.tail)
    return {};
  // Only worth it when the next rollout on one of these nodes is waiting.
  bool next_waits = false;
  for (auto& [n, g] : r->second.need)
    if (auto* next = next_on_node(n))
      next_waits |= waiting(*next, phase_kind::rollout);
  if (!next_waits)
    return {};
  auto& run = r->second;
  const int total = members_.at(job).rollout_gpus;
  const int keep = std::max(1, int(std::ceil(total * (1.0 - tail_threshold_) - 1e-9)));
  int excess = run.total_held() - keep;
  if (excess <= 0)
    return {};
  // Consolidate onto the first nodes: release from the last ones.
  for (auto it = run.held.rbegin(); it != run.held.rend() && excess > 0; ++it) {
    int n = std::min(excess, int(it->second.size()));
    give(nodes_.at(it->first), it->second, size_t(n));
    excess -= n;
  }
  run.tail = true;
  executor_actions out;
  out.resizes.push_back(gpu_resize{job, run.total_held(), devices_of(run)});
  auto more = dispatch();
  out.grants = std::move(more.grants);
  out.resizes.insert(out.resizes.end(), more.resizes.begin(), more.resizes.end());
  return out;
}

executor_actions round_robin::dispatch() {
  executor_actions out;
  grow_rollouts(out);
  start_rollouts(out);
  start_training(out);
  return out;
}

void round_robin::grow_rollouts(executor_actions& out) {
  std::vector<std::pair<uint64_t, std::string>> order;
  for (auto& [job, run] : rollouts_)
    if (!run.tail)
      order.emplace_back(run.order, job);
  std::sort(order.begin(), order.end());
  for (auto& [o, job] : order) {
    auto& run = rollouts_.at(job);
    bool grew = false;
    for (auto& [n, need] : run.need) {
      auto& ns = nodes_.at(n);
      auto& held = run.held[n];
      if (int count = std::min(ns.free, need - int(held.size())); count > 0) {
        take(ns, count, held);
        grew = true;
      }
    }
    if (grew)
      out.resizes.push_back(gpu_resize{job, run.total_held(), devices_of(run)});
  }
}

void round_robin::start_rollouts(executor_actions& out) {
  // A start moves the turn on, so scan again until nothing starts.
  for (bool started = true; started;) {
    started = false;
    for (auto& [job, m] : members_) {
      if (!waiting(job, phase_kind::rollout))
        continue;
      auto need = need_of(m);
      bool next = true;
      int available = 0;
      for (auto& [n, g] : need) {
        auto* first = next_on_node(n);
        next &= first && *first == job;
        available += std::min(nodes_.at(n).free, g);
      }
      if (!next || available == 0)
        continue;
      running_rollout run{next_order_++, need, {}, false};
      phase_grant grant{job, phase_kind::rollout, 0, 0, false, 0, {}, {}};
      for (auto& [n, g] : need) {
        auto& nn = nodes_.at(n);
        take(nn, std::min(nn.free, g), run.held[n]);
        if (!run.held[n].empty() && nn.last_job != job) {
          bool warm = nn.resident.count(job) > 0;
          grant.cold |= !warm;
          grant.switch_s = std::max(grant.switch_s, warm ? m.switches.rollout.warm_s
                                                         : m.switches.rollout.cold_s);
          nn.resident.insert(job);
          nn.last_job = job;
        }
      }
      ++m.rollout_turn;
      grant.gpus = run.total_held();
      grant.devices = devices_of(run);
      rollouts_.emplace(job, std::move(run));
      out.grants.push_back(std::move(grant));
      started = true;
    }
  }
}

void round_robin::start_training(executor_actions& out) {
  auto* trainee = next_in_training();
  if (training_running_ || !trainee || !waiting(*trainee, phase_kind::training))
    return;
  const std::string job = *trainee;
  auto& m = members_.at(job);
  ++m.training_turn;
  training_running_ = job;
  phase_grant grant{job, phase_kind::training, training_gpus_, 0, false, 0, {}, training_pool_};
  if (training_last_ != job) {
    bool warm = training_resident_.count(job) > 0;
    grant.switch_s = warm ? m.switches.training.warm_s : m.switches.training.cold_s;
    grant.cold = !warm;
    training_resident_.insert(job);
    training_last_ = job;
  }
  out.grants.push_back(std::move(grant));
}

std::vector<std::string> round_robin::jobs() const {
  std::vector<std::string> out;
  for (auto& [job, m] : members_)
    out.push_back(job);
  return out;
}

std::optional<phase_kind> round_robin::current_phase(const std::string& job) const {
  auto it = members_.find(job);
  if (it == members_.end())
    return std::nullopt;
  return it->second.phase;
}

bool round_robin::running(const std::string& job) const {
  auto it = members_.find(job);
  if (it == members_.end())
    return false;
  switch (it->second.phase) {
    case phase_kind::rollout: return rollouts_.count(job) > 0;
    case phase_kind::training: return training_running_ == job;
    case phase_kind::sync: return true; // permitted the moment training ends
  }
  return false;
}

std::optional<turn_place> round_robin::place_of(const std::string& job) const {
  auto it = members_.find(job);
  if (it == members_.end())
    return std::nullopt;
  // A start moves the turn on: once the current iteration's rollout has started, its round is
  // the one before.
  auto& m = it->second;
  const bool started = m.phase != phase_kind::rollout || rollouts_.count(job) > 0;
  return turn_place{m.position, m.rollout_turn - (started ? 1 : 0)};
}

std::string round_robin::wait_reason(const std::string& job) const {
  auto it = members_.find(job);
  if (it == members_.end() || running(job))
    return {};
  if (it->second.phase == phase_kind::training) {
    if (training_running_)
      return fmt::format("the training pool runs {}'s training", *training_running_);
    auto* next = next_in_training();
    return next && *next != job ? fmt::format("{}'s training turn comes first", *next)
                                : std::string{"waiting for the training pool"};
  }
  for (int n : it->second.rollout_nodes) {
    auto* next = next_on_node(n);
    if (next && *next != job)
      return fmt::format("{}'s rollout turn on {} comes first", *next, node_name(n));
  }
  std::vector<std::string> holders;
  for (auto& [other, run] : rollouts_)
    holders.push_back(other);
  return fmt::format("its rollout nodes have no free GPU (held by {})", fmt::join(holders, ", "));
}

int round_robin::free_gpus(int n) const {
  auto it = nodes_.find(n);
  return it == nodes_.end() ? gpus_per_node_ : it->second.free;
}

int round_robin::rollout_gpus_held(const std::string& job) const {
  auto it = rollouts_.find(job);
  return it == rollouts_.end() ? 0 : it->second.total_held();
}

std::vector<std::string>
round_robin::in_turn_order(std::vector<std::pair<turn, std::string>> jobs) {
  std::sort(jobs.begin(), jobs.end());
  std::vector<std::string> out;
  for (auto& [t, job] : jobs)
    out.push_back(std::move(job));
  return out;
}

std::vector<std::string> round_robin::rollout_queue(int n) const {
  std::vector<std::pair<turn, std::string>> order;
  if (auto it = nodes_.find(n); it != nodes_.end())
    for (auto& job : it->second.pinned)
      if (waiting(job, phase_kind::rollout)) {
        auto& m = members_.at(job);
        order.emplace_back(turn{m.rollout_turn, m.position}, job);
      }
  return in_turn_order(std::move(order));
}

std::vector<std::string> round_robin::training_queue() const {
  std::vector<std::pair<turn, std::string>> order;
  for (auto& [job, m] : members_)
    if (waiting(job, phase_kind::training))
      order.emplace_back(turn{m.training_turn, m.position}, job);
  return in_turn_order(std::move(order));
}

} // namespace loom
