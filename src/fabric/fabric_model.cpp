#include "fabric/fabric_model.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace loom {

fabric_model_result fabric_model::build(const fabric_config& config,
                                        const std::vector<node>& nodes) {
  fabric_model m;
  m.kind = config.kind;
  m.link_bytes_per_s = config.link_gbps * 1e9 / 8;
  m.rails = std::max(1, config.nics_per_server);
  m.index_servers(config, nodes);
  m.index_devices(config);
  std::string error = m.attach_tors(config);
  if (error.empty())
    error = m.wire_links(config);
  if (error.empty()) {
    m.index_ports();
    error = m.wire_nics(config);
  }
  if (!error.empty())
    return {std::nullopt, std::move(error)};
  return {std::move(m), {}};
}

void fabric_model::index_servers(const fabric_config& config, const std::vector<node>& nodes) {
  std::map<std::string, int> gpus_of;
  for (auto& n : nodes)
    gpus_of[n.id] = n.gpus;
  for (auto& p : config.pods) {
    for (auto& s : p.servers) {
      auto g = gpus_of.find(s);
      servers.push_back({s, uint32_t(pods.size()), g == gpus_of.end() ? 8 : g->second,
                         rails >= 2 ? 2 : 1});
    }
    pods.push_back(p.id);
  }
  pod_tors_.resize(pods.size());
  failed_.assign(servers.size(), false);
}

void fabric_model::index_devices(const fabric_config& config) {
  for (auto& d : config.ocs) {
    fabric_device dev{d.id, d.tier, -1, d.rail, uint32_t(d.ports), d.reconfig_ms / 1e3,
                      d.driver, d.address};
    if (!d.pod.empty())
      dev.pod = int(*pod_index(d.pod));
    port_offset_.push_back(masked_.size());
    masked_.resize(masked_.size() + size_t(d.ports) + 1, false);
    for (int p : d.masked_ports)
      masked_[port_offset_.back() + size_t(p)] = true;
    managed_.resize(masked_.size(), false);
    for (int p : d.managed_ports)
      managed_[port_offset_.back() + size_t(p)] = true;
    devices.push_back(dev);
  }
  port_offset_.push_back(masked_.size());
  roles_.resize(masked_.size());
  held_.assign(masked_.size(), false);
}

/// Each ToR serves its rack (or its whole PoD) on its rail; a NIC hangs off one ToR.
std::string fabric_model::attach_tors(const fabric_config& config) {
  tor_index_.assign(servers.size() * size_t(rails), -1);
  for (auto& t : config.tors) {
    uint32_t pod = *pod_index(t.pod);
    uint32_t ti = uint32_t(tors.size());
    tors.push_back({t.id, pod, t.rail, {}});
    pod_tors_[pod].push_back(ti);
    for (uint32_t s = 0; s < servers.size(); ++s) {
      if (servers[s].pod != pod)
        continue;
      if (!t.servers.empty()
          && std::find(t.servers.begin(), t.servers.end(), servers[s].id) == t.servers.end())
        continue;
      auto& slot = tor_index_[s * size_t(rails) + size_t(t.rail)];
      if (slot >= 0)
        return fmt::format("NIC {} of server '{}' attaches to both '{}' and '{}'", t.rail,
                           servers[s].id, tors[size_t(slot)].id, t.id);
      slot = int(ti);
    }
  }
  return {};
}

/// RFabric §5.1: ToR uplinks into their PoD's OCS-Agg, Agg boundary ports into the OCS-Core.
std::string fabric_model::wire_links(const fabric_config& config) {
  std::map<std::string_view, uint32_t> tor_of_id;
  std::map<std::string_view, uint32_t> device_of_id;
  for (uint32_t i = 0; i < tors.size(); ++i)
    tor_of_id.emplace(tors[i].id, i);
  for (uint32_t i = 0; i < devices.size(); ++i)
    device_of_id.emplace(devices[i].id, i);
  auto find = [](const auto& index, const std::string& id) -> std::optional<uint32_t> {
    auto it = index.find(id);
    return it == index.end() ? std::nullopt : std::optional{it->second};
  };
  for (auto& l : config.links) {
    auto tor_a = find(tor_of_id, l.a.device);
    auto tor_b = find(tor_of_id, l.b.device);
    auto dev_a = find(device_of_id, l.a.device);
    auto dev_b = find(device_of_id, l.b.device);
    if (tor_a.has_value() != tor_b.has_value()) {
      auto [tor_side, ocs_side, dev] = tor_a ? std::tie(l.a, l.b, dev_b)
                                             : std::tie(l.b, l.a, dev_a);
      if (!dev || devices[*dev].tier != ocs_tier::agg)
        return fmt::format("ToR '{}' port {} must go up to an OCS-Agg, not '{}'",
                           tor_side.device, tor_side.port, ocs_side.device);
      auto& tor = tors[*find(tor_of_id, tor_side.device)];
      if (devices[*dev].pod != int(tor.pod))
        return fmt::format("ToR '{}' goes up to '{}' of another PoD", tor.id, ocs_side.device);
      tor.uplinks.push_back({*dev, uint32_t(ocs_side.port)});
      continue;
    }
    if (dev_a && dev_b) {
      auto ta = devices[*dev_a].tier;
      auto tb = devices[*dev_b].tier;
      if (ta == ocs_tier::agg && tb == ocs_tier::core) {
        boundaries.push_back({uint32_t(devices[*dev_a].pod), {*dev_a, uint32_t(l.a.port)},
                              {*dev_b, uint32_t(l.b.port)}});
        continue;
      }
      if (ta == ocs_tier::core && tb == ocs_tier::agg) {
        boundaries.push_back({uint32_t(devices[*dev_b].pod), {*dev_b, uint32_t(l.b.port)},
                              {*dev_a, uint32_t(l.a.port)}});
        continue;
      }
    }
    return fmt::format("link {}:{} - {}:{} is neither a ToR uplink nor an Agg-Core boundary "
                       "link", l.a.device, l.a.port, l.b.device, l.b.port);
  }
  return {};
}

/// Local indices (App. D's ToR endpoints, mFabric's server endpoints) and port roles.
void fabric_model::index_ports() {
  for (auto& t : tors)
    std::sort(t.uplinks.begin(), t.uplinks.end());
  tor_local_.resize(tors.size());
  for (auto& local : pod_tors_)
    for (uint32_t i = 0; i < local.size(); ++i)
      tor_local_[local[i]] = i;
  std::vector<uint32_t> seen(pods.size(), 0);
  for (auto& sv : servers)
    server_local_.push_back(seen[sv.pod]++);
  for (uint32_t t = 0; t < tors.size(); ++t)
    for (auto& up : tors[t].uplinks)
      roles_[slot(up)] = {port_role::tor_uplink, t};
  for (uint32_t i = 0; i < boundaries.size(); ++i) {
    roles_[slot(boundaries[i].agg)] = {port_role::boundary_agg, i};
    roles_[slot(boundaries[i].core)] = {port_role::boundary_core, i};
  }
}

/// Regional and rail devices take server NICs directly, in server order.
std::string fabric_model::wire_nics(const fabric_config& config) {
  for (size_t di = 0; di < config.ocs.size(); ++di) {
    auto& d = config.ocs[di];
    uint32_t port = 1;
    for (uint32_t s = 0; s < servers.size(); ++s) {
      std::vector<int> nics;
      if (d.tier == ocs_tier::regional && int(servers[s].pod) == devices[di].pod)
        nics = d.nics;
      if (d.tier == ocs_tier::rail)
        nics = {d.rail};
      for (int nic : nics) {
        if (port > uint32_t(d.ports))
          return fmt::format("'{}' has {} ports, too few for its servers' NICs", d.id, d.ports);
        roles_[slot({uint32_t(di), port})] = {port_role::nic, uint32_t(nic_links.size())};
        nic_links.push_back({s, nic, {uint32_t(di), port++}});
      }
    }
  }
  return {};
}

std::optional<uint32_t> fabric_model::pod_index(std::string_view id) const {
  for (uint32_t i = 0; i < pods.size(); ++i)
    if (pods[i] == id)
      return i;
  return std::nullopt;
}

int fabric_model::nic_of(const rank_ref& r) const {
  int gpus = std::max(1, servers[r.server].gpus);
  return r.gpu * rails / gpus;
}

int fabric_model::tor_of(const rank_ref& r) const {
  return tor_index_[r.server * size_t(rails) + size_t(nic_of(r))];
}

int fabric_model::numa_of_nic(uint32_t server, int nic) const {
  return nic * servers[server].numa_nodes / rails;
}

std::optional<uint32_t> fabric_model::server_index(std::string_view id) const {
  for (uint32_t i = 0; i < servers.size(); ++i)
    if (servers[i].id == id)
      return i;
  return std::nullopt;
}

std::optional<uint32_t> fabric_model::device_index(std::string_view id) const {
  for (uint32_t i = 0; i < devices.size(); ++i)
    if (devices[i].id == id)
      return i;
  return std::nullopt;
}

bool fabric_model::masked(const ocs_port& p) const {
  const auto s = slot(p);
  return masked_[s] || held_[s]
         || (roles_[s].kind == port_role::nic && failed_[nic_links[roles_[s].index].server]);
}

void fabric_model::mask(const ocs_port& p) {
  masked_[slot(p)] = true;
}

} // namespace loom
