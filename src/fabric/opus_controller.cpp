#include "fabric/opus_controller.hpp"

namespace loom {

std::vector<comm_phase> learn_phases(const std::vector<traced_op>& trace) {
  std::vector<comm_phase> out;
  for (size_t i = 0; i < trace.size(); ++i) {
    if (!out.empty() && out.back().dim == trace[i].dim)
      out.back().last = i;
    else
      out.push_back({trace[i].dim, i, i});
  }
  return out;
}

std::optional<topo_transition> opus_controller::write(const topo_write& w) {
  auto key = std::make_pair(w.group, w.op_index);
  auto& r = ready_[key];
  ++r.count;
  r.digits.emplace_back(w.stage, w.digit);
  if (r.count < w.group_size)
    return std::nullopt;
  topo_transition t{w.group, w.op_index, planned_, planned_, {}};
  for (auto [stage, digit] : r.digits)
    t.to.set(stage, digit);
  t.reprogram = stages_to_reprogram(t.from, t.to);
  planned_ = t.to;
  ready_.erase(key);
  return t;
}

} // namespace loom
