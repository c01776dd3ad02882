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

namespace {

allocation run_allocator(allocation_policy policy, const std::vector<uint32_t>& ports,
                         const std::vector<demand>& demands, double link_bytes_per_s,
                         const std::function<bool(uint32_t, uint32_t)>& eligible) {
  return policy == allocation_policy::uniform
           ? allocate_uniform(ports, demands, eligible)
           : allocate_circuits(ports, demands, link_bytes_per_s, eligible);
}

physical_circuit make_circuit(const ocs_port& x, const ocs_port& y) {
  return {x.device, std::min(x.port, y.port), std::max(x.port, y.port)};
}

/// The ports an endpoint may still use, in (device, port) order; taken ones are removed.
class port_pool {
public:
  void add(const ocs_port& p) { free_.insert(p); }
  size_t size() const { return free_.size(); }
  size_t on(uint32_t device) const {
    auto lo = free_.lower_bound({device, 0});
    auto hi = free_.lower_bound({device + 1, 0});
    return size_t(std::distance(lo, hi));
  }
  bool take(const ocs_port& p) { return free_.erase(p) > 0; }
  std::optional<ocs_port> take_on(uint32_t device) {
    auto it = free_.lower_bound({device, 0});
    if (it == free_.end() || it->device != device)
      return std::nullopt;
    auto p = *it;
    free_.erase(it);
    return p;
  }
  std::set<uint32_t> devices() const {
    std::set<uint32_t> out;
    for (auto& p : free_)
      out.insert(p.device);
    return out;
  }

private:
  std::set<ocs_port> free_;
};

/// One circuit between two pools on the device where both have the most ports left.
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

/// The end of every materialisation: a shortfall, a failed validation or stranded demand is
/// the rejection; otherwise the plan, sorted, with its layout.
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

} // namespace

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

materialized materialize_plan(const fabric_model& model, const topology_template& tpl,
                              const aggregated_demand& demand, const port_usage& usage,
                              const std::string& owner, const circuit_plan* previous,
                              allocation_policy policy) {
  materialized out;
  circuit_plan plan;
  plan.owner = owner;
  plan.stage = tpl.stage;
  const double b = model.link_bytes_per_s;
  const uint32_t pods = uint32_t(model.pods.size());
  std::set<physical_circuit> kept_before;
  if (previous)
    kept_before.insert(previous->circuits.begin(), previous->circuits.end());

  // -- OCS-Core: PoD endpoints over the available boundary links -----------------------------
  auto link_at_core = [&](const ocs_port& p) -> std::optional<uint32_t> {
    auto& r = model.role(p);
    return r.kind == port_role::boundary_core ? std::optional{r.index} : std::nullopt;
  };
  std::vector<port_pool> core_pool(pods);
  for (auto& l : model.boundaries)
    if (usable(model, usage, l.agg, owner) && usable(model, usage, l.core, owner))
      core_pool[l.pod].add(l.core);
  // deg(PoD) after reservations: boundary links, the template's slice, and the uplinks its
  // lifting ToRs have free beyond the ones they need to reach their PoD peers: core capacity
  // the OCS-Agg cannot lift would fail the coupling.
  std::vector<uint32_t> core_deg(pods);
  for (uint32_t p = 0; p < pods; ++p) {
    core_deg[p] = uint32_t(core_pool[p].size());
    if (tpl.core_slice > 0)
      core_deg[p] = std::min(core_deg[p], tpl.core_slice);
    if (p >= demand.pods.size())
      continue;
    auto& pd = demand.pods[p];
    std::set<uint32_t> lifting;
    std::set<uint32_t> intra; // ToRs with ToR-ToR demand keep ports to reach their peers
    for (auto& d : pd.demands) {
      if (d.from == pd.boundary() || d.to == pd.boundary()) {
        lifting.insert(d.from == pd.boundary() ? d.to : d.from);
      } else {
        intra.insert(d.from);
        intra.insert(d.to);
      }
    }
    const uint32_t keep = !(tpl.tor_to_tor && tpl.spans(p)) ? 0 : tpl.backbone_ring ? 2 : 1;
    uint32_t lift = 0;
    for (auto t : lifting) {
      uint32_t free = 0;
      for (auto& up : model.tors[pd.tors[t]].uplinks)
        free += usable(model, usage, up, owner) ? 1 : 0;
      uint32_t reserved = intra.count(t) ? keep : 0;
      lift += free > reserved ? free - reserved : 0;
    }
    core_deg[p] = std::min(core_deg[p], lift);
  }
  // Each core device is a plane of its own: a PoD's budget is split over the devices in
  // proportion to its boundary ports there, and Alg. 3 runs per plane on the same demand (its
  // choices depend only on demand ratios). Within one device any two free ports can be
  // cross-connected, so every allocated circuit is realisable.
  std::set<uint32_t> core_devices;
  for (auto& pool : core_pool)
    for (auto d : pool.devices())
      core_devices.insert(d);
  std::map<uint32_t, std::vector<uint32_t>> plane_deg;
  for (auto d : core_devices)
    plane_deg[d].assign(pods, 0);
  for (uint32_t p = 0; p < pods; ++p) {
    size_t total = core_pool[p].size();
    if (total == 0)
      continue;
    uint32_t given = 0;
    for (auto d : core_devices) {
      auto on = uint32_t(core_pool[p].on(d));
      plane_deg[d][p] = uint32_t(uint64_t(core_deg[p]) * on / total);
      given += plane_deg[d][p];
    }
    for (auto d : core_devices) // the rounding remainder, first come first served
      for (; given < core_deg[p] && plane_deg[d][p] < core_pool[p].on(d); ++given)
        ++plane_deg[d][p];
  }
  std::vector<std::vector<uint32_t>> lifted_links(pods); // boundary links the core uses
  size_t shortfall = 0;
  auto place = [&](const physical_circuit& pc) {
    plan.circuits.push_back(pc);
    for (auto port : {pc.a, pc.b}) {
      auto link = *link_at_core({pc.device, port});
      lifted_links[model.boundaries[link].pod].push_back(link);
    }
  };
  for (auto d : core_devices) {
    auto alloc = run_allocator(policy, plane_deg[d], demand.core, b, [&](uint32_t x, uint32_t y) {
      return tpl.core_eligible(x, y);
    });
    out.allocator_steps += alloc.steps;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> want;
    for (auto& c : alloc.circuits)
      want[{c.a, c.b}] = c.circuits;
    // Keep the previous plan's circuits on this device that still serve a wanted pair.
    for (auto& pc : kept_before) {
      if (pc.device != d)
        continue;
      auto a = link_at_core({pc.device, pc.a});
      auto z = link_at_core({pc.device, pc.b});
      if (!a || !z)
        continue;
      auto pa = model.boundaries[*a].pod;
      auto pz = model.boundaries[*z].pod;
      auto key = std::minmax(pa, pz);
      auto it = want.find({key.first, key.second});
      if (it == want.end() || it->second == 0)
        continue;
      if (!core_pool[pa].take({pc.device, pc.a}) || !core_pool[pz].take({pc.device, pc.b}))
        continue;
      --it->second;
      place(pc);
    }
    for (auto& [pair, n] : want)
      for (; n > 0; --n) {
        auto x = core_pool[pair.first].take_on(d);
        auto y = core_pool[pair.second].take_on(d);
        if (!x || !y) {
          shortfall += n;
          break;
        }
        place(make_circuit(*x, *y));
      }
  }

  // -- OCS-Agg per PoD: its ToRs and its boundary -------------------------------------------
  std::vector<std::vector<physical_circuit>> kept_agg(pods); // the previous plan's, by PoD
  for (auto& pc : kept_before)
    if (auto pod = model.devices[pc.device].pod; pod >= 0 && model.devices[pc.device].tier == ocs_tier::agg)
      kept_agg[size_t(pod)].push_back(pc);
  for (uint32_t p = 0; p < pods; ++p) {
    auto& local = model.tors_of_pod(p);
    const uint32_t boundary = uint32_t(local.size());
    const auto& pod_dem = p < demand.pods.size() ? demand.pods[p].demands : std::vector<loom::demand>{};
    if (pod_dem.empty() && lifted_links[p].empty())
      continue;
    std::vector<port_pool> pool(local.size());
    // The local ToR an uplink of this PoD belongs to.
    auto tor_at = [&](const ocs_port& port) -> std::optional<uint32_t> {
      auto& r = model.role(port);
      if (r.kind != port_role::tor_uplink || model.tors[r.index].pod != p)
        return std::nullopt;
      return model.local_index(r.index);
    };
    std::vector<uint32_t> deg(local.size() + 1, 0);
    for (uint32_t i = 0; i < local.size(); ++i)
      for (auto& up : model.tors[local[i]].uplinks)
        if (usable(model, usage, up, owner))
          pool[i].add(up);
    for (uint32_t i = 0; i < local.size(); ++i)
      deg[i] = uint32_t(pool[i].size());
    deg[boundary] = uint32_t(lifted_links[p].size());
    const bool intra = tpl.tor_to_tor && tpl.spans(p);
    // Lift/drop first: the core circuits already planned are useless unless lifted, so their
    // ports are reserved before ToR-ToR pairs compete for the rest (App. D's port
    // reservations; the Core-Agg coupling is a hard constraint).
    auto lifts = run_allocator(policy, deg, pod_dem, b, [&](uint32_t x, uint32_t y) {
      return y == boundary || x == boundary;
    });
    deg = lifts.free_ports;
    std::vector<circuit_count> ring;
    if (intra && tpl.backbone_ring) {
      std::set<uint32_t> demanding;
      for (auto& d : pod_dem)
        for (auto e : {d.from, d.to})
          if (e != boundary && deg[e] > 0)
            demanding.insert(e);
      std::vector<uint32_t> order(demanding.begin(), demanding.end());
      for (size_t i = 0; order.size() >= 2 && i < (order.size() == 2 ? 1 : order.size()); ++i) {
        auto key = std::minmax(order[i], order[(i + 1) % order.size()]);
        if (deg[key.first] == 0 || deg[key.second] == 0)
          continue;
        --deg[key.first];
        --deg[key.second];
        ring.push_back({key.first, key.second, 1});
      }
    }
    auto alloc = run_allocator(policy, deg, pod_dem, b, [&](uint32_t x, uint32_t y) {
      return intra && x != boundary && y != boundary;
    });
    out.allocator_steps += lifts.steps + alloc.steps + ring.size();
    alloc.circuits.insert(alloc.circuits.end(), lifts.circuits.begin(), lifts.circuits.end());
    alloc.circuits.insert(alloc.circuits.end(), ring.begin(), ring.end());
    std::set<ocs_port> to_lift; // agg ports of the boundary links the core uses, unlifted yet
    for (auto li : lifted_links[p])
      to_lift.insert(model.boundaries[li].agg);
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> want;
    for (auto& c : alloc.circuits)
      want[{c.a, c.b}] += c.circuits;
    // The previous plan's Agg circuits first, where they still serve a wanted pair.
    for (auto& pc : kept_agg[p]) {
      auto x = tor_at({pc.device, pc.a});
      auto y = tor_at({pc.device, pc.b});
      if (x && y) {
        auto key = std::minmax(*x, *y);
        auto it = want.find({key.first, key.second});
        if (it != want.end() && it->second > 0 && pool[*x].take({pc.device, pc.a})
            && pool[*y].take({pc.device, pc.b})) {
          --it->second;
          plan.circuits.push_back(pc);
        }
        continue;
      }
      auto tor = x ? x : y;
      ocs_port lift{pc.device, x ? pc.b : pc.a};
      if (!tor || !to_lift.count(lift))
        continue;
      auto it = want.find({*tor, boundary});
      if (it != want.end() && it->second > 0 && pool[*tor].take({pc.device, x ? pc.a : pc.b})) {
        --it->second;
        to_lift.erase(lift);
        plan.circuits.push_back(pc);
      }
    }
    for (auto& [pair, n] : want) {
      for (; n > 0; --n) {
        if (pair.second != boundary) {
          auto pc = take_pair(pool[pair.first], pool[pair.second]);
          if (!pc)
            break;
          plan.circuits.push_back(*pc);
          continue;
        }
        // A lift/drop circuit: a ToR uplink on the device of a boundary port still to lift.
        // None there is what the Core-Agg coupling check reports, not a port shortfall.
        auto it = std::find_if(to_lift.begin(), to_lift.end(), [&](const ocs_port& lp) {
          return pool[pair.first].on(lp.device) > 0;
        });
        if (it == to_lift.end()) {
          n = 0;
          break;
        }
        plan.circuits.push_back(make_circuit(*pool[pair.first].take_on(it->device), *it));
        to_lift.erase(it);
      }
      shortfall += n;
    }
  }
  return conclude(model, std::move(plan), usage, shortfall, "ports", out.allocator_steps,
                  &demand);
}

materialized materialize_regional(const fabric_model& model, uint32_t pod,
                                  const std::vector<demand>& servers, const port_usage& usage,
                                  const std::string& owner, const circuit_plan* previous) {
  materialized out;
  circuit_plan plan;
  plan.owner = owner;
  plan.stage = fabric_stage::train_compute;
  std::vector<uint32_t> members; // local server index -> server
  for (uint32_t s = 0; s < model.servers.size(); ++s)
    if (model.servers[s].pod == pod)
      members.push_back(s);
  std::vector<int> local(model.servers.size(), -1);
  for (uint32_t i = 0; i < members.size(); ++i)
    local[members[i]] = int(i);
  // Per server: its free OCS NICs per NUMA node.
  std::vector<std::vector<port_pool>> pool(members.size());
  std::map<ocs_port, std::pair<uint32_t, int>> nic_at; // port -> (local server, NUMA)
  for (auto& l : model.nic_links) {
    if (local[l.server] < 0 || model.devices[l.port.device].tier != ocs_tier::regional)
      continue;
    auto i = uint32_t(local[l.server]);
    int numa = model.numa_of_nic(l.server, l.nic);
    nic_at[l.port] = {i, numa};
    if (model.failed(l.server) || !usable(model, usage, l.port, owner))
      continue;
    if (pool[i].size() <= size_t(numa))
      pool[i].resize(size_t(numa) + 1);
    pool[i][size_t(numa)].add(l.port);
  }
  std::vector<uint32_t> deg(members.size(), 0);
  for (uint32_t i = 0; i < members.size(); ++i)
    for (auto& n : pool[i])
      deg[i] += uint32_t(n.size());
  auto alloc = allocate_circuits(deg, servers, model.link_bytes_per_s);
  out.allocator_steps = alloc.steps;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> want;
  for (auto& c : alloc.circuits)
    want[{c.a, c.b}] = c.circuits;
  // Per pair and server, circuits already on each NUMA node: the permutation spreads a pair's
  // circuits over NUMA nodes on both ends (mFabric §5.2 step 4, permuteLinks).
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::vector<uint32_t>>> numa_use;
  auto note = [&](uint32_t x, uint32_t y, int numa_x, int numa_y) {
    auto& u = numa_use[std::minmax(x, y)];
    u.resize(2);
    for (auto [side, numa] : {std::pair{x < y ? 0 : 1, numa_x}, std::pair{x < y ? 1 : 0, numa_y}}) {
      if (u[size_t(side)].size() <= size_t(numa))
        u[size_t(side)].resize(size_t(numa) + 1, 0);
      ++u[size_t(side)][size_t(numa)];
    }
  };
  if (previous)
    for (auto& pc : previous->circuits) {
      auto x = nic_at.find({pc.device, pc.a});
      auto y = nic_at.find({pc.device, pc.b});
      if (x == nic_at.end() || y == nic_at.end())
        continue;
      auto key = std::minmax(x->second.first, y->second.first);
      auto it = want.find({key.first, key.second});
      if (it == want.end() || it->second == 0)
        continue;
      auto& px = pool[x->second.first];
      auto& py = pool[y->second.first];
      if (px.size() <= size_t(x->second.second) || py.size() <= size_t(y->second.second)
          || !px[size_t(x->second.second)].take({pc.device, pc.a})
          || !py[size_t(y->second.second)].take({pc.device, pc.b}))
        continue;
      --it->second;
      note(x->second.first, y->second.first, x->second.second, y->second.second);
      plan.circuits.push_back(pc);
    }
  size_t shortfall = 0;
  for (auto& [pair, n] : want) {
    for (; n > 0; --n) {
      // For each end, the NUMA node this pair uses least, then the one with most NICs free;
      // both ends on one device.
      auto pick = [&](uint32_t s, int side, uint32_t device) -> int {
        auto& u = numa_use[pair];
        u.resize(2);
        int best = -1;
        for (int numa = 0; numa < int(pool[s].size()); ++numa) {
          if (pool[s][size_t(numa)].on(device) == 0)
            continue;
          auto used = [&](int k) {
            return size_t(k) < u[size_t(side)].size() ? u[size_t(side)][size_t(k)] : 0u;
          };
          if (best < 0 || used(numa) < used(best)
              || (used(numa) == used(best)
                  && pool[s][size_t(numa)].size() > pool[s][size_t(best)].size()))
            best = numa;
        }
        return best;
      };
      std::set<uint32_t> devices;
      for (auto& p : pool[pair.first])
        for (auto d : p.devices())
          devices.insert(d);
      bool placed = false;
      for (auto d : devices) {
        int nx = pick(pair.first, 0, d);
        int ny = pick(pair.second, 1, d);
        if (nx < 0 || ny < 0)
          continue;
        auto px = pool[pair.first][size_t(nx)].take_on(d);
        auto py = pool[pair.second][size_t(ny)].take_on(d);
        plan.circuits.push_back(make_circuit(*px, *py));
        note(pair.first, pair.second, nx, ny);
        placed = true;
        break;
      }
      if (!placed)
        break;
    }
    shortfall += n;
  }
  return conclude(model, std::move(plan), usage, shortfall, "NICs", out.allocator_steps, nullptr);
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
