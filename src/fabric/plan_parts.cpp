#include "fabric/plan_parts.hpp"

#include <algorithm>
#include <functional>
#include <iterator>

#include <fmt/format.h>

namespace loom::plan_parts {

namespace {

/// Demand the plan's circuits cannot carry at all: a demanded ToR pair of a PoD with no
/// circuit path between them, a PoD whose ToRs cannot reach a lift, or PoDs the core does not
/// join. Such a plan would strand traffic, so it does not validate.
std::string unserved_demand(const fabric_model& model, const circuit_layout& layout,
                            const aggregated_demand& demand) {
  std::vector<uint32_t> parent;
  std::function<uint32_t(uint32_t)> find = [&](uint32_t x) {
    return parent[x] == x ? x : parent[x] = find(parent[x]);
  };
  auto join = [&](uint32_t a, uint32_t b) { parent[find(a)] = find(b); };
  for (uint32_t p = 0; p < demand.pods.size(); ++p) {
    auto& pd = demand.pods[p];
    parent.resize(pd.tors.size() + 1);
    for (uint32_t i = 0; i < parent.size(); ++i)
      parent[i] = i;
    if (p < layout.agg.size())
      for (auto& c : layout.agg[p])
        join(c.a, c.b);
    for (auto& d : pd.demands)
      if (find(d.from) != find(d.to)) {
        auto name = [&](uint32_t e) {
          return e == pd.boundary() ? std::string{"the core"} : model.tors[pd.tors[e]].id;
        };
        return fmt::format("no circuit path from {} to {} in PoD '{}'", name(d.from), name(d.to),
                           model.pods[p]);
      }
  }
  parent.resize(model.pods.size());
  for (uint32_t i = 0; i < parent.size(); ++i)
    parent[i] = i;
  for (auto& c : layout.core)
    join(c.a, c.b);
  for (auto& d : demand.core)
    if (find(d.from) != find(d.to))
      return fmt::format("no core path from PoD '{}' to PoD '{}'", model.pods[d.from],
                         model.pods[d.to]);
  return {};
}

} // namespace

allocation run_allocator(allocation_policy policy, const std::vector<uint32_t>& ports,
                         const std::vector<demand>& demands, double link_bytes_per_s,
                         const std::function<bool(uint32_t, uint32_t)>& eligible) {
  if (policy == allocation_policy::traffic_aware || policy == allocation_policy::algorithm_3)
    return allocate_circuits(ports, demands, link_bytes_per_s, eligible);
  return allocate_uniform(ports, demands, eligible, policy == allocation_policy::uniform);
}

physical_circuit make_circuit(const ocs_port& x, const ocs_port& y) {
  return {x.device, std::min(x.port, y.port), std::max(x.port, y.port)};
}

size_t port_pool::on(uint32_t device) const {
  auto lo = free_.lower_bound({device, 0});
  auto hi = free_.lower_bound({device + 1, 0});
  return size_t(std::distance(lo, hi));
}

std::optional<ocs_port> port_pool::take_on(uint32_t device) {
  auto it = free_.lower_bound({device, 0});
  if (it == free_.end() || it->device != device)
    return std::nullopt;
  auto p = *it;
  free_.erase(it);
  return p;
}

std::set<uint32_t> port_pool::devices() const {
  std::set<uint32_t> out;
  for (auto& p : free_)
    out.insert(p.device);
  return out;
}

std::optional<physical_circuit> take_pair(port_pool& x, port_pool& y) {
  std::optional<uint32_t> best;
  size_t best_room = 0;
  for (auto d : x.devices()) {
    size_t room = std::min(x.on(d), y.on(d));
    if (room > best_room) {
      best_room = room;
      best = d;
    }
  }
  if (!best)
    return std::nullopt;
  return make_circuit(*x.take_on(*best), *y.take_on(*best));
}

bool usable(const fabric_model& m, const port_usage& u, const ocs_port& p,
            const std::string& owner) {
  return !m.masked(p) && !u.busy_for(p, owner);
}

materialized conclude(const fabric_model& model, circuit_plan plan, const port_usage& usage,
                      size_t shortfall, std::string_view ends, uint64_t steps,
                      const aggregated_demand* demand) {
  materialized out;
  out.allocator_steps = steps;
  if (shortfall > 0) {
    out.rejection = fmt::format("{} allocated circuits have no pair of free {} on one device",
                                shortfall, ends);
    return out;
  }
  std::sort(plan.circuits.begin(), plan.circuits.end());
  plan.layout = layout_of(model, plan.circuits);
  out.rejection = validate_plan(model, plan, usage);
  if (out.rejection.empty() && demand)
    out.rejection = unserved_demand(model, plan.layout, *demand);
  if (out.rejection.empty())
    out.plan = std::move(plan);
  return out;
}


} // namespace loom::plan_parts
