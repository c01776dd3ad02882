// mFabric §5.2 (Alg. 1) on one PoD's regional OCS: server-to-server demand to NIC circuits,
// a pair's circuits permuted across NUMA nodes on both ends (permuteLinks); and an intent's
// regional plans, one per PoD it spans, merged into one plan (§4.2: isolated regions).
//
// Alg. 1's greedy spends a server's few OCS NICs on its heaviest peers first; when a server
// has fewer NICs than peers, that can leave light pairs to relay over a thin EPS share or the
// circuit graph split (a demanded pair with no path at all), far slower than a split blind to
// the volumes (measured: 2.1x at 8 servers with 6 of 8 NICs on the OCS). So Alg. 1 also plans
// the same pairs at equal volumes, both plans are timed by the flow model on the demand asked
// for, and the blind one replaces the traffic-aware one only when it finishes that sooner.

#include <algorithm>
#include <map>
#include <set>

#include "fabric/broadcast.hpp"
#include "fabric/flow_model.hpp"
#include "fabric/plan_parts.hpp"

namespace loom {

namespace {

using namespace plan_parts;
using server_pair = std::pair<uint32_t, uint32_t>;

class regional_materializer {
public:
  regional_materializer(const fabric_model& model, uint32_t pod, const port_usage& usage,
                        const std::string& owner)
    : model_(model), usage_(usage), owner_(owner), local_(model.servers.size(), -1) {
    plan_.owner = owner;
    plan_.stage = fabric_stage::train_compute;
    for (uint32_t s = 0; s < model.servers.size(); ++s)
      if (model.servers[s].pod == pod) {
        local_[s] = int(members_.size());
        members_.push_back(s);
      }
    pool_.resize(members_.size());
    index_nics();
  }

  /// `blind`: Alg. 1 on the same pairs at equal volumes, the static split's plan.
  materialized run(std::vector<demand> servers, const circuit_plan* previous, bool blind) {
    std::vector<uint32_t> deg(members_.size(), 0);
    for (uint32_t i = 0; i < members_.size(); ++i)
      for (auto& n : pool_[i])
        deg[i] += uint32_t(n.size());
    if (blind)
      for (auto& d : servers)
        d.bytes = 1;
    auto alloc = allocate_circuits(deg, servers, model_.link_bytes_per_s);
    std::map<server_pair, uint32_t> want;
    for (auto& c : alloc.circuits)
      want[{c.a, c.b}] = c.circuits;
    if (previous)
      keep(*previous, want);
    size_t shortfall = 0;
    for (auto& [pair, n] : want) {
      for (; n > 0 && place(pair); --n) {
      }
      shortfall += n;
    }
    return conclude(model_, std::move(plan_), usage_, shortfall, "NICs", alloc.steps, nullptr);
  }

private:
  /// Per server: its free OCS NICs per NUMA node; every regional NIC port's server and NUMA.
  void index_nics() {
    for (auto& l : model_.nic_links) {
      if (local_[l.server] < 0 || model_.devices[l.port.device].tier != ocs_tier::regional)
        continue;
      auto i = uint32_t(local_[l.server]);
      int numa = model_.numa_of_nic(l.server, l.nic);
      nic_at_[l.port] = {i, numa};
      if (model_.failed(l.server) || !usable(model_, usage_, l.port, owner_))
        continue;
      if (pool_[i].size() <= size_t(numa))
        pool_[i].resize(size_t(numa) + 1);
      pool_[i][size_t(numa)].add(l.port);
    }
  }

  /// Circuits of a pair already on each NUMA node of both ends.
  void note(uint32_t x, uint32_t y, int numa_x, int numa_y) {
    auto& u = numa_use_[std::minmax(x, y)];
    u.resize(2);
    for (auto [side, numa] : {std::pair{x < y ? 0 : 1, numa_x}, std::pair{x < y ? 1 : 0, numa_y}}) {
      if (u[size_t(side)].size() <= size_t(numa))
        u[size_t(side)].resize(size_t(numa) + 1, 0);
      ++u[size_t(side)][size_t(numa)];
    }
  }

  /// The previous plan's circuits that still serve a wanted pair stay on their NICs.
  void keep(const circuit_plan& previous, std::map<server_pair, uint32_t>& want) {
    for (auto& pc : previous.circuits) {
      auto x = nic_at_.find({pc.device, pc.a});
      auto y = nic_at_.find({pc.device, pc.b});
      if (x == nic_at_.end() || y == nic_at_.end())
        continue;
      auto key = std::minmax(x->second.first, y->second.first);
      auto it = want.find({key.first, key.second});
      if (it == want.end() || it->second == 0)
        continue;
      auto& px = pool_[x->second.first];
      auto& py = pool_[y->second.first];
      if (px.size() <= size_t(x->second.second) || py.size() <= size_t(y->second.second)
          || !px[size_t(x->second.second)].take({pc.device, pc.a})
          || !py[size_t(y->second.second)].take({pc.device, pc.b}))
        continue;
      --it->second;
      note(x->second.first, y->second.first, x->second.second, y->second.second);
      plan_.circuits.push_back(pc);
    }
  }

  /// For one end of the pair, the NUMA node this pair uses least on `device`, then the one
  /// with most NICs free; -1 if none has a NIC there.
  int pick(const server_pair& pair, uint32_t s, int side, uint32_t device) {
    auto& u = numa_use_[pair];
    u.resize(2);
    auto used = [&](int k) {
      return size_t(k) < u[size_t(side)].size() ? u[size_t(side)][size_t(k)] : 0u;
    };
    int best = -1;
    for (int numa = 0; numa < int(pool_[s].size()); ++numa) {
      if (pool_[s][size_t(numa)].on(device) == 0)
        continue;
      if (best < 0 || used(numa) < used(best)
          || (used(numa) == used(best)
              && pool_[s][size_t(numa)].size() > pool_[s][size_t(best)].size()))
        best = numa;
    }
    return best;
  }

  /// One more circuit for the pair, both ends on one device; false if there is no room.
  bool place(const server_pair& pair) {
    std::set<uint32_t> devices;
    for (auto& p : pool_[pair.first])
      for (auto d : p.devices())
        devices.insert(d);
    for (auto d : devices) {
      int nx = pick(pair, pair.first, 0, d);
      int ny = pick(pair, pair.second, 1, d);
      if (nx < 0 || ny < 0)
        continue;
      auto px = pool_[pair.first][size_t(nx)].take_on(d);
      auto py = pool_[pair.second][size_t(ny)].take_on(d);
      plan_.circuits.push_back(make_circuit(*px, *py));
      note(pair.first, pair.second, nx, ny);
      return true;
    }
    return false;
  }

  const fabric_model& model_;
  const port_usage& usage_;
  const std::string& owner_;
  std::vector<uint32_t> members_; // local server index -> server
  std::vector<int> local_;        // server -> local index, or -1
  std::vector<std::vector<port_pool>> pool_;
  std::map<ocs_port, std::pair<uint32_t, int>> nic_at_; // port -> (local server, NUMA)
  std::map<server_pair, std::vector<std::vector<uint32_t>>> numa_use_;
  circuit_plan plan_;
};

/// How long a regional plan takes to carry the server demand it was planned for (the PoD's
/// local server indices), on the flow model.
double completion_s(const fabric_model& model, uint32_t pod, const circuit_plan& plan,
                    const std::vector<demand>& servers) {
  std::vector<uint32_t> members;
  for (uint32_t s = 0; s < model.servers.size(); ++s)
    if (model.servers[s].pod == pod)
      members.push_back(s);
  std::vector<rank_flow> flows;
  for (auto& d : servers)
    flows.push_back({{members[d.from], 0}, {members[d.to], 0}, d.bytes});
  return fabric_network(model, plan.layout).completion_s(flows);
}

} // namespace

materialized materialize_regional(const fabric_model& model, uint32_t pod,
                                  const std::vector<demand>& servers, const port_usage& usage,
                                  const std::string& owner, const circuit_plan* previous) {
  auto aware = regional_materializer{model, pod, usage, owner}.run(servers, previous, false);
  // Equal volumes already: the blind plan would be this one.
  if (std::all_of(servers.begin(), servers.end(),
                  [&](const demand& d) { return d.bytes == servers.front().bytes; }))
    return aware;
  auto blind = regional_materializer{model, pod, usage, owner}.run(servers, previous, true);
  if (!blind.plan)
    return aware;
  if (aware.plan
      && completion_s(model, pod, *blind.plan, servers)
           >= completion_s(model, pod, *aware.plan, servers))
    return aware;
  blind.allocator_steps += aware.allocator_steps;
  return blind;
}

materialized materialize_regions(const fabric_model& model, const stage_template& tpl,
                                 const std::vector<rank_flow>& flows, const port_usage& usage,
                                 const std::string& owner, const circuit_plan* previous) {
  materialized all;
  all.plan = circuit_plan{};
  all.plan->owner = owner;
  all.plan->stage = tpl.stage;
  for (uint32_t p = 0; p < model.pods.size(); ++p) {
    if (!tpl.spans(p))
      continue;
    auto r = materialize_regional(model, p, server_demand(model, p, flows), usage, owner,
                                  previous);
    all.allocator_steps += r.allocator_steps;
    if (!r.plan)
      return r;
    all.plan->circuits.insert(all.plan->circuits.end(), r.plan->circuits.begin(),
                              r.plan->circuits.end());
    all.plan->layout.agg.resize(model.pods.size());
    all.plan->layout.agg[p] = r.plan->layout.agg[p];
  }
  std::sort(all.plan->circuits.begin(), all.plan->circuits.end());
  return all;
}

materialized materialize_intent(const fabric_model& model, const stage_template& tpl,
                                const fabric_intent& intent, const port_usage& usage,
                                const circuit_plan* previous) {
  auto flows = planned_flows(model, intent);
  // RFabric §5.4 (i): a failed server's ranks carry nothing until the job replaces them (its
  // next intent) or the server is back.
  std::erase_if(flows, [&](const rank_flow& f) {
    return model.failed(f.src.server) || model.failed(f.dst.server);
  });
  if (model.kind == fabric_kind::mfabric)
    return materialize_regions(model, tpl, flows, usage, intent.owner, previous);
  return materialize_plan(model, tpl, aggregate_demand(model, flows), usage, intent.owner,
                          previous);
}

} // namespace loom
