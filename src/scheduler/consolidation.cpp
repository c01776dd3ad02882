#include "scheduler/consolidation.hpp"

#include <algorithm>
#include <limits>

namespace loom {

regrouping plan_regrouping(placement_engine& engine, uint64_t group,
                           const std::map<std::string, member_outlook>& outlook) {
  regrouping out;
  out.group = group;
  auto it = engine.groups().find(group);
  if (it == engine.groups().end())
    return out;
  const auto members = it->second.members;
  const double share_per_hour = engine.group_cost_per_hour(group) / double(members.size());
  double horizon_s = std::numeric_limits<double>::infinity();
  double restart_s = 0;
  for (auto& m : members) {
    auto o = outlook.find(m.job.id);
    if (o == outlook.end())
      return out;
    horizon_s = std::min(horizon_s, o->second.remaining_s);
    restart_s += o->second.restart_s;
  }
  const double before = engine.cost_per_hour();
  auto after = engine.cost_after_regrouping(group);
  if (!after || before - *after <= 1e-9)
    return out;
  for (auto& m : members)
    out.moves.push_back(m.job);
  out.saving_per_hour = before - *after;
  out.horizon_h = horizon_s / 3600;
  out.restart_cost = restart_s / 3600 * share_per_hour;
  return out;
}

} // namespace loom
