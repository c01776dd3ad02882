#include "fabric/rail_orchestrator.hpp"

#include <algorithm>
#include <iterator>

namespace loom {

rail_orchestrator::rail_orchestrator(opus_layout layout, topo_id initial, int max_retries,
                                     uint32_t first_port)
  : layout_(std::move(layout)), barrier_(std::move(initial)), max_retries_(max_retries),
    first_port_(first_port) {}

rail_acks rail_orchestrator::acks_for(std::vector<uint64_t> writers) const {
  return {std::move(writers), {current().str(), fallen_back_}};
}

bool rail_orchestrator::waits(const std::vector<int>& stages) const {
  for (auto& p : queue_)
    for (int s : p.transition.reprogram)
      if (std::find(stages.begin(), stages.end(), s) != stages.end())
        return true;
  return false;
}

rail_write_outcome rail_orchestrator::write(const topo_write& w, uint64_t writer) {
  auto key = group_key{w.group, w.op_index};
  writing_[key].emplace_back(writer, w.stage);
  rail_write_outcome out;
  out.transition = barrier_.write(w);
  if (!out.transition)
    return out;
  std::vector<uint64_t> writers;
  std::vector<int> stages;
  for (auto [token, stage] : writing_[key]) {
    writers.push_back(token);
    stages.push_back(stage);
  }
  writing_.erase(key);
  const auto& t = *out.transition;
  if (fallen_back_) {
    // The giant ring serves every operation; the topology only follows the writes.
    barrier_.confirm(t);
    out.acks.push_back(acks_for(std::move(writers)));
    return out;
  }
  if (t.reprogram.empty() && !waits(stages)) {
    // O1: the rails already serve these stages. Nothing is confirmed: a pending transition
    // of other stages is not on the rails yet.
    out.acks.push_back(acks_for(std::move(writers)));
    return out;
  }
  queue_.push_back({t, std::move(writers), 0});
  return out;
}

const topo_transition* rail_orchestrator::start(const std::function<bool(int)>& busy) {
  if (applying_ || queue_.empty())
    return nullptr;
  auto& front = queue_.front().transition;
  if (busy)
    for (int s : front.reprogram)
      if (busy(s))
        return nullptr; // G2: an operation still uses a sub-mapping this changes
  applying_ = true;
  return &front;
}

rail_apply_outcome rail_orchestrator::finish(bool ok) {
  applying_ = false;
  rail_apply_outcome out;
  auto& front = queue_.front();
  out.attempts = ++front.attempts;
  if (!ok && front.attempts <= max_retries_) {
    out.retry = true;
    return out;
  }
  if (!ok) {
    fallen_back_ = true;
    out.fell_back = true;
    for (auto& p : queue_)
      out.acks.push_back(acks_for(std::move(p.writers)));
    queue_.clear();
    return out;
  }
  barrier_.confirm(front.transition);
  out.acks.push_back(acks_for(std::move(front.writers)));
  queue_.pop_front();
  // O1 writers that waited for it (or for the ones before it) are served now.
  while (!queue_.empty() && queue_.front().transition.reprogram.empty()) {
    barrier_.confirm(queue_.front().transition);
    out.acks.push_back(acks_for(std::move(queue_.front().writers)));
    queue_.pop_front();
  }
  return out;
}

std::vector<cross_connect> rail_orchestrator::stages_mapping(const topo_id& id,
                                                             const std::vector<int>& stages,
                                                             uint32_t ports) const {
  std::vector<cross_connect> out;
  const auto ranks = uint32_t(layout_.ranks());
  const auto base = first_port_ - 1;
  for (int s : stages)
    for (auto x : submapping(layout_, id, s))
      out.push_back({x.in + base, x.out - ranks + ports + base});
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<cross_connect> rail_orchestrator::mapping(uint32_t ports) const {
  std::vector<int> all(size_t(layout_.pp));
  for (int i = 0; i < layout_.pp; ++i)
    all[size_t(i)] = i;
  return stages_mapping(current(), all, ports);
}

namespace {

xc_diff between(const std::vector<cross_connect>& from, const std::vector<cross_connect>& to) {
  xc_diff d;
  std::set_difference(from.begin(), from.end(), to.begin(), to.end(),
                      std::back_inserter(d.removes));
  std::set_difference(to.begin(), to.end(), from.begin(), from.end(), std::back_inserter(d.adds));
  return d;
}

} // namespace

xc_diff rail_orchestrator::diff(const topo_transition& t, uint32_t ports) const {
  return between(stages_mapping(t.from, t.reprogram, ports),
                 stages_mapping(t.to, t.reprogram, ports));
}

namespace {

std::vector<cross_connect> giant_ring(uint32_t ranks, uint32_t first_port, uint32_t ports) {
  std::vector<cross_connect> ring;
  for (uint32_t i = 0; i < ranks; ++i)
    ring.push_back({first_port + i, ports + first_port + (i + 1) % ranks});
  std::sort(ring.begin(), ring.end());
  return ring;
}

} // namespace

xc_diff rail_orchestrator::giant_ring_diff(uint32_t ports) const {
  return between(mapping(ports), giant_ring(uint32_t(layout_.ranks()), first_port_, ports));
}

std::vector<cross_connect> rail_orchestrator::carried(uint32_t ports) const {
  return fallen_back_ ? giant_ring(uint32_t(layout_.ranks()), first_port_, ports)
                      : mapping(ports);
}

} // namespace loom
