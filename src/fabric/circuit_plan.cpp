#include "fabric/circuit_plan.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

namespace loom {

port_usage::port_usage(const fabric_model& model) : model_(&model), owner_(model.slots()) {}

void port_usage::claim(const circuit_plan& plan) {
  for (auto& p : plan_ports(plan))
    owner_[model_->slot(p)] = plan.owner;
}

void port_usage::release(const circuit_plan& plan) {
  for (auto& p : plan_ports(plan))
    if (auto& o = owner_[model_->slot(p)]; o == plan.owner)
      o.clear();
}

bool port_usage::busy_for(const ocs_port& port, const std::string& owner) const {
  auto& o = owner_[model_->slot(port)];
  return !o.empty() && o != owner;
}

std::vector<ocs_port> plan_ports(const circuit_plan& plan) {
  std::vector<ocs_port> out;
  for (auto& c : plan.circuits) {
    out.push_back({c.device, c.a});
    out.push_back({c.device, c.b});
  }
  return out;
}

circuit_layout layout_of(const fabric_model& model, const std::vector<physical_circuit>& circuits) {
  circuit_layout layout;
  layout.agg.resize(model.pods.size());
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> agg_count;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> core_count;
  // A port's endpoint: per PoD its ToRs then its boundary (RFabric), or its servers (mFabric
  // regional); a core port stands for its PoD.
  auto endpoint = [&](const ocs_port& port) -> std::optional<std::pair<uint32_t, uint32_t>> {
    auto& r = model.role(port);
    switch (r.kind) {
      case port_role::tor_uplink:
        return std::pair{model.tors[r.index].pod, model.local_index(r.index)};
      case port_role::boundary_agg: {
        auto pod = model.boundaries[r.index].pod;
        return std::pair{pod, uint32_t(model.tors_of_pod(pod).size())};
      }
      case port_role::nic: {
        auto& l = model.nic_links[r.index];
        if (model.devices[l.port.device].tier != ocs_tier::regional)
          return std::nullopt; // rail circuits: Opus keeps its own mapping
        return std::pair{model.servers[l.server].pod, model.local_server(l.server)};
      }
      default:
        return std::nullopt;
    }
  };
  for (auto& pc : circuits) {
    auto& ra = model.role({pc.device, pc.a});
    auto& rb = model.role({pc.device, pc.b});
    if (ra.kind == port_role::boundary_core && rb.kind == port_role::boundary_core) {
      ++core_count[std::minmax(model.boundaries[ra.index].pod, model.boundaries[rb.index].pod)];
      continue;
    }
    auto ea = endpoint({pc.device, pc.a});
    auto eb = endpoint({pc.device, pc.b});
    if (!ea || !eb)
      continue;
    auto key = std::minmax(ea->second, eb->second);
    ++agg_count[{ea->first, key.first, key.second}];
  }
  for (auto& [k, n] : agg_count)
    layout.agg[std::get<0>(k)].push_back({std::get<1>(k), std::get<2>(k), n});
  for (auto& [k, n] : core_count)
    layout.core.push_back({k.first, k.second, n});
  return layout;
}

std::string validate_plan(const fabric_model& model, const circuit_plan& plan,
                          const port_usage& usage) {
  std::vector<bool> seen(model.slots(), false);
  for (auto& p : plan_ports(plan)) {
    if (p.device >= model.devices.size() || p.port < 1 || p.port > model.devices[p.device].ports)
      return fmt::format("port {} does not exist", p.port);
    auto& dev = model.devices[p.device].id;
    if (model.masked(p))
      return fmt::format("port {}:{} is masked (failed)", dev, p.port);
    if (usage.busy_for(p, plan.owner))
      return fmt::format("port {}:{} is held by another plan", dev, p.port);
    if (seen[model.slot(p)])
      return fmt::format("port {}:{} is used twice", dev, p.port);
    seen[model.slot(p)] = true;
  }
  // Core-Agg coupling (App. D): each boundary port a core circuit uses must be lifted/dropped
  // by an Agg circuit of the same plan.
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> per_pod; // PoD -> (core uses, lifted)
  for (auto& c : plan.circuits) {
    if (model.devices[c.device].tier != ocs_tier::core)
      continue;
    for (auto port : {c.a, c.b}) {
      auto& r = model.role({c.device, port});
      if (r.kind != port_role::boundary_core)
        return fmt::format("core port {}:{} is not patched to any PoD",
                           model.devices[c.device].id, port);
      auto& link = model.boundaries[r.index];
      auto& counts = per_pod[link.pod];
      ++counts.first;
      if (seen[model.slot(link.agg)])
        ++counts.second;
    }
  }
  for (auto& [pod, counts] : per_pod)
    if (counts.second < counts.first)
      return fmt::format("Core-Agg coupling: PoD '{}' uses {} boundary ports on the core but its "
                         "OCS-Agg lifts only {}", model.pods[pod], counts.first, counts.second);
  return {};
}

std::vector<cross_connect> device_cross_connects(const fabric_model& model,
                                                 const std::vector<physical_circuit>& circuits,
                                                 uint32_t device) {
  std::vector<cross_connect> out;
  const uint32_t n = model.devices[device].ports;
  for (auto& c : circuits)
    if (c.device == device) {
      out.push_back({c.a, n + c.b});
      out.push_back({c.b, n + c.a});
    }
  std::sort(out.begin(), out.end());
  return out;
}

std::map<uint32_t, xc_diff> plan_diff(const fabric_model& model,
                                      const std::vector<physical_circuit>& from,
                                      const std::vector<physical_circuit>& to) {
  std::set<physical_circuit> a(from.begin(), from.end());
  std::set<physical_circuit> z(to.begin(), to.end());
  std::map<uint32_t, xc_diff> out;
  for (auto& c : a)
    if (!z.count(c))
      for (auto& x : device_cross_connects(model, {c}, c.device))
        out[c.device].removes.push_back(x);
  for (auto& c : z)
    if (!a.count(c))
      for (auto& x : device_cross_connects(model, {c}, c.device))
        out[c.device].adds.push_back(x);
  return out;
}

} // namespace loom
