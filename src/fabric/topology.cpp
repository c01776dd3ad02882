#include "fabric/topology.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"

namespace loom {

namespace {

caf::error wiring_error(std::string message) {
  return make_error(errc::invalid_config, std::move(message));
}

} // namespace

caf::expected<fabric_model> fabric_model::build(const fabric_topology& topo,
                                                const std::vector<node>& nodes) {
  fabric_model m;
  m.kind = topo.kind;
  m.link_bytes_per_s = topo.link_gbps * 1e9 / 8;
  m.rails = std::max(1, topo.nics_per_server);
  std::map<std::string, int> gpus_of;
  for (auto& n : nodes)
    gpus_of[n.id] = n.gpus;
  std::map<std::string, uint32_t> pod_index;
  for (auto& p : topo.pods) {
    pod_index[p.id] = uint32_t(m.pods.size());
    for (auto& s : p.servers) {
      auto g = gpus_of.find(s);
      m.servers.push_back({s, uint32_t(m.pods.size()), g == gpus_of.end() ? 8 : g->second,
                           m.rails >= 2 ? 2 : 1});
    }
    m.pods.push_back(p.id);
  }
  m.pod_tors_.resize(m.pods.size());
  m.failed_.assign(m.servers.size(), false);

  for (auto& d : topo.ocs) {
    fabric_device dev{d.id, d.tier, -1, d.rail, uint32_t(d.ports), d.reconfig_ms / 1e3,
                      d.driver, d.address};
    if (!d.pod.empty())
      dev.pod = int(pod_index.at(d.pod));
    m.port_offset_.push_back(m.masked_.size());
    m.masked_.resize(m.masked_.size() + size_t(d.ports) + 1, false);
    for (int p : d.masked_ports)
      m.masked_[m.port_offset_.back() + size_t(p)] = true;
    m.devices.push_back(dev);
  }
  m.port_offset_.push_back(m.masked_.size());
  m.roles_.resize(m.masked_.size());

  m.tor_index_.assign(m.servers.size() * size_t(m.rails), -1);
  std::map<std::string, uint32_t> tor_index;
  for (auto& t : topo.tors) {
    uint32_t pod = pod_index.at(t.pod);
    uint32_t ti = uint32_t(m.tors.size());
    tor_index[t.id] = ti;
    m.tors.push_back({t.id, pod, t.rail, {}});
    m.pod_tors_[pod].push_back(ti);
    for (uint32_t s = 0; s < m.servers.size(); ++s) {
      if (m.servers[s].pod != pod)
        continue;
      if (!t.servers.empty()
          && std::find(t.servers.begin(), t.servers.end(), m.servers[s].id) == t.servers.end())
        continue;
      auto& slot = m.tor_index_[s * size_t(m.rails) + size_t(t.rail)];
      if (slot >= 0)
        return wiring_error(fmt::format("NIC {} of server '{}' attaches to both '{}' and '{}'",
                                        t.rail, m.servers[s].id, m.tors[size_t(slot)].id, t.id));
      slot = int(ti);
    }
  }

  for (auto& l : topo.links) {
    auto tor_a = tor_index.find(l.a.device);
    auto tor_b = tor_index.find(l.b.device);
    auto dev_a = m.device_index(l.a.device);
    auto dev_b = m.device_index(l.b.device);
    if ((tor_a != tor_index.end()) != (tor_b != tor_index.end())) {
      auto [tor_side, ocs_side, dev] = tor_a != tor_index.end()
                                          ? std::tie(l.a, l.b, dev_b)
                                          : std::tie(l.b, l.a, dev_a);
      if (!dev || m.devices[*dev].tier != ocs_tier::agg)
        return wiring_error(fmt::format("ToR '{}' port {} must go up to an OCS-Agg, not '{}'",
                                        tor_side.device, tor_side.port, ocs_side.device));
      auto& tor = m.tors[tor_index.at(tor_side.device)];
      if (m.devices[*dev].pod != int(tor.pod))
        return wiring_error(fmt::format("ToR '{}' goes up to '{}' of another PoD", tor.id,
                                        ocs_side.device));
      tor.uplinks.push_back({*dev, uint32_t(ocs_side.port)});
      continue;
    }
    if (dev_a && dev_b) {
      auto ta = m.devices[*dev_a].tier;
      auto tb = m.devices[*dev_b].tier;
      if (ta == ocs_tier::agg && tb == ocs_tier::core) {
        m.boundaries.push_back({uint32_t(m.devices[*dev_a].pod), {*dev_a, uint32_t(l.a.port)},
                                {*dev_b, uint32_t(l.b.port)}});
        continue;
      }
      if (ta == ocs_tier::core && tb == ocs_tier::agg) {
        m.boundaries.push_back({uint32_t(m.devices[*dev_b].pod), {*dev_b, uint32_t(l.b.port)},
                                {*dev_a, uint32_t(l.a.port)}});
        continue;
      }
    }
    return wiring_error(fmt::format("link {}:{} - {}:{} is neither a ToR uplink nor an "
                                    "Agg-Core boundary link", l.a.device, l.a.port, l.b.device,
                                    l.b.port));
  }
  for (auto& t : m.tors)
    std::sort(t.uplinks.begin(), t.uplinks.end());
  m.tor_local_.resize(m.tors.size());
  for (auto& local : m.pod_tors_)
    for (uint32_t i = 0; i < local.size(); ++i)
      m.tor_local_[local[i]] = i;
  std::vector<uint32_t> seen(m.pods.size(), 0);
  for (auto& sv : m.servers)
    m.server_local_.push_back(seen[sv.pod]++);
  for (uint32_t t = 0; t < m.tors.size(); ++t)
    for (auto& up : m.tors[t].uplinks)
      m.roles_[m.slot(up)] = {port_role::tor_uplink, t};
  for (uint32_t i = 0; i < m.boundaries.size(); ++i) {
    m.roles_[m.slot(m.boundaries[i].agg)] = {port_role::boundary_agg, i};
    m.roles_[m.slot(m.boundaries[i].core)] = {port_role::boundary_core, i};
  }

  // Regional and rail devices take server NICs directly, in server order.
  for (size_t di = 0; di < topo.ocs.size(); ++di) {
    auto& d = topo.ocs[di];
    uint32_t port = 1;
    auto wire = [&](uint32_t s, int nic) -> caf::error {
      if (port > uint32_t(d.ports))
        return wiring_error(fmt::format("'{}' has {} ports, too few for its servers' NICs", d.id,
                                        d.ports));
      m.roles_[m.slot({uint32_t(di), port})] = {port_role::nic, uint32_t(m.nic_links.size())};
      m.nic_links.push_back({s, nic, {uint32_t(di), port++}});
      return {};
    };
    for (uint32_t s = 0; s < m.servers.size(); ++s) {
      if (d.tier == ocs_tier::regional && int(m.servers[s].pod) == m.devices[di].pod)
        for (int nic : d.nics)
          if (auto err = wire(s, nic))
            return err;
      if (d.tier == ocs_tier::rail)
        if (auto err = wire(s, d.rail))
          return err;
    }
  }
  return m;
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
  return masked_[slot(p)];
}

void fabric_model::mask(const ocs_port& p) {
  masked_[slot(p)] = true;
}

void fabric_model::fail_server(uint32_t server) {
  failed_[server] = true;
  for (auto& l : nic_links)
    if (l.server == server)
      mask(l.port);
}

} // namespace loom
