// RFabric Alg. 2's AllocateCircuits on the OCS-Core and each PoD's OCS-Agg (App. D), mapped
// to concrete duplex ports. The core is planned first; its circuits are useless unless their
// boundary ports are lifted by Agg circuits, so each PoD's Agg reserves those lifts before its
// ToR pairs compete for the rest. Circuits of the previous plan between the same endpoints
// stay on their ports. Traffic-aware ToR-ToR circuits are refined for multi-hop routing
// (fabric/hop_refine.hpp, beyond the paper).

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "fabric/hop_refine.hpp"
#include "fabric/plan_parts.hpp"

namespace loom {

namespace {

using namespace plan_parts;

/// A PoD's ToR-ToR demands, without its lifts and drops.
std::vector<demand> tor_demands(const std::vector<demand>& pod_dem, uint32_t boundary) {
  std::vector<demand> out;
  for (auto& d : pod_dem)
    if (d.from != boundary && d.to != boundary)
      out.push_back(d);
  return out;
}

class rfabric_materializer {
public:
  rfabric_materializer(const fabric_model& model, const stage_template& tpl,
                       const aggregated_demand& demand, const port_usage& usage,
                       const std::string& owner, const circuit_plan* previous,
                       allocation_policy policy)
    : model_(model), tpl_(tpl), demand_(demand), usage_(usage), owner_(owner),
      policy_(policy), pods_(uint32_t(model.pods.size())), lifted_(pods_) {
    plan_.owner = owner;
    plan_.stage = tpl.stage;
    if (previous)
      kept_before_.insert(previous->circuits.begin(), previous->circuits.end());
  }

  materialized run() {
    auto pools = core_pools();
    auto planes = plane_degrees(pools, core_degrees(pools));
    for (auto& [device, degrees] : planes)
      plan_core_plane(device, degrees, pools);
    std::vector<std::vector<physical_circuit>> kept_agg(pods_); // the previous plan's, by PoD
    for (auto& pc : kept_before_)
      if (auto pod = model_.devices[pc.device].pod;
          pod >= 0 && model_.devices[pc.device].tier == ocs_tier::agg)
        kept_agg[size_t(pod)].push_back(pc);
    for (uint32_t p = 0; p < pods_; ++p)
      plan_pod(p, kept_agg[p]);
    return conclude(model_, std::move(plan_), usage_, shortfall_, "ports", steps_, &demand_);
  }

private:
  bool usable(const ocs_port& p) const { return plan_parts::usable(model_, usage_, p, owner_); }

  std::optional<uint32_t> link_at_core(const ocs_port& p) const {
    auto& r = model_.role(p);
    return r.kind == port_role::boundary_core ? std::optional{r.index} : std::nullopt;
  }

  /// Per PoD, the core ports of its boundary links that are usable at both ends.
  std::vector<port_pool> core_pools() const {
    std::vector<port_pool> pools(pods_);
    for (auto& l : model_.boundaries)
      if (usable(l.agg) && usable(l.core))
        pools[l.pod].add(l.core);
    return pools;
  }

  /// deg(PoD) after reservations: boundary links, the template's slice, and the uplinks its
  /// lifting ToRs have free beyond the ones they need to reach their PoD peers: core capacity
  /// the OCS-Agg cannot lift would fail the coupling.
  std::vector<uint32_t> core_degrees(const std::vector<port_pool>& pools) const {
    std::vector<uint32_t> deg(pods_);
    for (uint32_t p = 0; p < pods_; ++p) {
      deg[p] = uint32_t(pools[p].size());
      if (tpl_.core_slice > 0)
        deg[p] = std::min(deg[p], tpl_.core_slice);
      if (p < demand_.pods.size())
        deg[p] = std::min(deg[p], lift_capacity(p));
    }
    return deg;
  }

  uint32_t lift_capacity(uint32_t p) const {
    auto& pd = demand_.pods[p];
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
    const uint32_t keep = !(tpl_.tor_to_tor && tpl_.spans(p)) ? 0 : tpl_.backbone_ring ? 2 : 1;
    uint32_t lift = 0;
    for (auto t : lifting) {
      uint32_t free = 0;
      for (auto& up : model_.tors[pd.tors[t]].uplinks)
        free += usable(up) ? 1 : 0;
      uint32_t reserved = intra.count(t) ? keep : 0;
      lift += free > reserved ? free - reserved : 0;
    }
    return lift;
  }

  /// Each core device is a plane of its own: a PoD's budget is split over the devices in
  /// proportion to its boundary ports there, and Alg. 3 runs per plane on the same demand (its
  /// choices depend only on demand ratios). Within one device any two free ports can be
  /// cross-connected, so every allocated circuit is realisable.
  std::map<uint32_t, std::vector<uint32_t>> plane_degrees(const std::vector<port_pool>& pools,
                                                          const std::vector<uint32_t>& deg) const {
    std::set<uint32_t> devices;
    for (auto& pool : pools)
      for (auto d : pool.devices())
        devices.insert(d);
    std::map<uint32_t, std::vector<uint32_t>> planes;
    for (auto d : devices)
      planes[d].assign(pods_, 0);
    for (uint32_t p = 0; p < pods_; ++p) {
      size_t total = pools[p].size();
      if (total == 0)
        continue;
      uint32_t given = 0;
      for (auto d : devices) {
        auto on = uint32_t(pools[p].on(d));
        planes[d][p] = uint32_t(uint64_t(deg[p]) * on / total);
        given += planes[d][p];
      }
      for (auto d : devices) // the rounding remainder, first come first served
        for (; given < deg[p] && planes[d][p] < pools[p].on(d); ++given)
          ++planes[d][p];
    }
    return planes;
  }

  void place_core(const physical_circuit& pc) {
    plan_.circuits.push_back(pc);
    for (auto port : {pc.a, pc.b}) {
      auto link = *link_at_core({pc.device, port});
      lifted_[model_.boundaries[link].pod].push_back(link);
    }
  }

  /// Alg. 3 on one core device; the previous plan's circuits there that still serve a wanted
  /// pair are kept.
  void plan_core_plane(uint32_t d, const std::vector<uint32_t>& degrees,
                       std::vector<port_pool>& pools) {
    auto alloc = run_allocator(policy_, degrees, demand_.core, model_.link_bytes_per_s,
                               [&](uint32_t x, uint32_t y) { return tpl_.core_eligible(x, y); });
    steps_ += alloc.steps;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> want;
    for (auto& c : alloc.circuits)
      want[{c.a, c.b}] = c.circuits;
    for (auto& pc : kept_before_) {
      if (pc.device != d)
        continue;
      auto a = link_at_core({pc.device, pc.a});
      auto z = link_at_core({pc.device, pc.b});
      if (!a || !z)
        continue;
      auto pa = model_.boundaries[*a].pod;
      auto pz = model_.boundaries[*z].pod;
      auto key = std::minmax(pa, pz);
      auto it = want.find({key.first, key.second});
      if (it == want.end() || it->second == 0)
        continue;
      if (!pools[pa].take({pc.device, pc.a}) || !pools[pz].take({pc.device, pc.b}))
        continue;
      --it->second;
      place_core(pc);
    }
    for (auto& [pair, n] : want)
      for (; n > 0; --n) {
        auto x = pools[pair.first].take_on(d);
        auto y = pools[pair.second].take_on(d);
        if (!x || !y) {
          shortfall_ += n;
          break;
        }
        place_core(make_circuit(*x, *y));
      }
  }

  /// A ring over each group of ToRs that talk to each other (a connected component of the
  /// PoD's ToR-ToR demand), one circuit per edge, before Alg. 3 runs. ToRs of groups that never
  /// talk (two EP groups, say) are not joined: that would spend their ports on nothing.
  std::vector<circuit_count> backbone_ring(const std::vector<demand>& pod_dem, uint32_t boundary,
                                           std::vector<uint32_t>& deg) const {
    std::vector<uint32_t> parent(deg.size());
    std::iota(parent.begin(), parent.end(), 0);
    std::function<uint32_t(uint32_t)> find = [&](uint32_t x) {
      return parent[x] == x ? x : parent[x] = find(parent[x]);
    };
    std::set<uint32_t> demanding;
    for (auto& d : pod_dem)
      if (d.from != boundary && d.to != boundary && deg[d.from] > 0 && deg[d.to] > 0) {
        demanding.insert(d.from);
        demanding.insert(d.to);
        parent[find(d.from)] = find(d.to);
      }
    std::map<uint32_t, std::vector<uint32_t>> groups;
    for (auto e : demanding)
      groups[find(e)].push_back(e);
    std::vector<circuit_count> ring;
    for (auto& [root, order] : groups)
      for (size_t i = 0; order.size() >= 2 && i < (order.size() == 2 ? 1 : order.size()); ++i) {
        auto key = std::minmax(order[i], order[(i + 1) % order.size()]);
        if (deg[key.first] == 0 || deg[key.second] == 0)
          continue;
        --deg[key.first];
        --deg[key.second];
        ring.push_back({key.first, key.second, 1});
      }
    return ring;
  }

  /// The circuits one PoD's OCS-Agg should carry, as multiplicities over its ToRs and the
  /// boundary: lift/drop first (App. D's port reservations; the Core-Agg coupling is a hard
  /// constraint), then the backbone ring, then ToR-ToR pairs.
  std::map<std::pair<uint32_t, uint32_t>, uint32_t>
  agg_wants(uint32_t p, const std::vector<demand>& pod_dem, std::vector<uint32_t> deg) {
    const auto boundary = uint32_t(deg.size() - 1);
    const bool intra = tpl_.tor_to_tor && tpl_.spans(p);
    auto lifts = run_allocator(policy_, deg, pod_dem, model_.link_bytes_per_s,
                               [&](uint32_t x, uint32_t y) { return y == boundary || x == boundary; });
    deg = lifts.free_ports;
    std::vector<circuit_count> ring;
    if (intra && tpl_.backbone_ring)
      ring = backbone_ring(pod_dem, boundary, deg);
    auto alloc = run_allocator(policy_, deg, pod_dem, model_.link_bytes_per_s,
                               [&](uint32_t x, uint32_t y) {
                                 return intra && x != boundary && y != boundary;
                               });
    steps_ += lifts.steps + alloc.steps + ring.size();
    alloc.circuits.insert(alloc.circuits.end(), ring.begin(), ring.end());
    if (intra && policy_ == allocation_policy::traffic_aware)
      alloc.circuits = hop_aware(std::move(alloc.circuits), ring, deg, pod_dem, boundary);
    alloc.circuits.insert(alloc.circuits.end(), lifts.circuits.begin(), lifts.circuits.end());
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> want;
    for (auto& c : alloc.circuits)
      want[{c.a, c.b}] += c.circuits;
    return want;
  }

  /// Beyond App. D (fabric/hop_refine.hpp): Alg. 3's ToR-ToR circuits or the even split of
  /// the same ports, whichever carries the PoD's ToR demand better over multiple hops, refined.
  std::vector<circuit_count> hop_aware(std::vector<circuit_count> aware,
                                       const std::vector<circuit_count>& ring,
                                       const std::vector<uint32_t>& deg,
                                       const std::vector<demand>& pod_dem,
                                       uint32_t boundary) const {
    const auto n = uint32_t(deg.size());
    const auto link = model_.link_bytes_per_s;
    auto tors = tor_demands(pod_dem, boundary);
    auto even = allocate_uniform(deg, tors).circuits;
    even.insert(even.end(), ring.begin(), ring.end());
    if (congestion(n, even, tors, link) < congestion(n, aware, tors, link))
      aware = std::move(even);
    return refine_for_hops(n, std::move(aware), tors, link);
  }

  /// The local ToR an uplink of PoD p belongs to.
  std::optional<uint32_t> tor_at(uint32_t p, const ocs_port& port) const {
    auto& r = model_.role(port);
    if (r.kind != port_role::tor_uplink || model_.tors[r.index].pod != p)
      return std::nullopt;
    return model_.local_index(r.index);
  }

  /// The previous plan's Agg circuits of PoD p first, where they still serve a wanted pair.
  void keep_agg(uint32_t p, const std::vector<physical_circuit>& kept, uint32_t boundary,
                std::map<std::pair<uint32_t, uint32_t>, uint32_t>& want,
                std::vector<port_pool>& pool, std::set<ocs_port>& to_lift) {
    for (auto& pc : kept) {
      auto x = tor_at(p, {pc.device, pc.a});
      auto y = tor_at(p, {pc.device, pc.b});
      if (x && y) {
        auto key = std::minmax(*x, *y);
        auto it = want.find({key.first, key.second});
        if (it != want.end() && it->second > 0 && pool[*x].take({pc.device, pc.a})
            && pool[*y].take({pc.device, pc.b})) {
          --it->second;
          plan_.circuits.push_back(pc);
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
        plan_.circuits.push_back(pc);
      }
    }
  }

  /// Concrete ports for what is still wanted. A lift/drop circuit needs a ToR uplink on the
  /// device of a boundary port still to lift; none there is what the Core-Agg coupling check
  /// reports, not a port shortfall.
  void place_agg(uint32_t boundary, std::map<std::pair<uint32_t, uint32_t>, uint32_t>& want,
                 std::vector<port_pool>& pool, std::set<ocs_port>& to_lift) {
    for (auto& [pair, n] : want) {
      for (; n > 0; --n) {
        if (pair.second != boundary) {
          auto pc = take_pair(pool[pair.first], pool[pair.second]);
          if (!pc)
            break;
          plan_.circuits.push_back(*pc);
          continue;
        }
        auto& from = pool[pair.first];
        auto it = std::find_if(to_lift.begin(), to_lift.end(),
                               [&](const ocs_port& lp) { return from.on(lp.device) > 0; });
        if (it == to_lift.end()) {
          n = 0;
          break;
        }
        plan_.circuits.push_back(make_circuit(*pool[pair.first].take_on(it->device), *it));
        to_lift.erase(it);
      }
      shortfall_ += n;
    }
  }

  /// One PoD's OCS-Agg: its ToRs and its boundary.
  void plan_pod(uint32_t p, const std::vector<physical_circuit>& kept) {
    auto& local = model_.tors_of_pod(p);
    const auto boundary = uint32_t(local.size());
    static const std::vector<demand> none;
    const auto& pod_dem = p < demand_.pods.size() ? demand_.pods[p].demands : none;
    if (pod_dem.empty() && lifted_[p].empty())
      return;
    std::vector<port_pool> pool(local.size());
    std::vector<uint32_t> deg(local.size() + 1, 0);
    for (uint32_t i = 0; i < local.size(); ++i) {
      for (auto& up : model_.tors[local[i]].uplinks)
        if (usable(up))
          pool[i].add(up);
      deg[i] = uint32_t(pool[i].size());
    }
    deg[boundary] = uint32_t(lifted_[p].size());
    auto want = agg_wants(p, pod_dem, deg);
    std::set<ocs_port> to_lift; // agg ports of the boundary links the core uses, unlifted yet
    for (auto li : lifted_[p])
      to_lift.insert(model_.boundaries[li].agg);
    keep_agg(p, kept, boundary, want, pool, to_lift);
    place_agg(boundary, want, pool, to_lift);
  }

  const fabric_model& model_;
  const stage_template& tpl_;
  const aggregated_demand& demand_;
  const port_usage& usage_;
  const std::string& owner_;
  allocation_policy policy_;
  uint32_t pods_;
  std::set<physical_circuit> kept_before_;
  circuit_plan plan_;
  std::vector<std::vector<uint32_t>> lifted_; // per PoD: boundary links the core uses
  size_t shortfall_ = 0;
  uint64_t steps_ = 0;
};

} // namespace

materialized materialize_plan(const fabric_model& model, const stage_template& tpl,
                              const aggregated_demand& demand, const port_usage& usage,
                              const std::string& owner, const circuit_plan* previous,
                              allocation_policy policy) {
  return rfabric_materializer{model, tpl, demand, usage, owner, previous, policy}.run();
}

} // namespace loom
