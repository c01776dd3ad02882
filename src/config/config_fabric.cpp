// The [fabric] section of a config: PoDs of servers, rail-aligned ToRs, OCS devices and the
// links between their ports, each checked where it is written (RFabric §5.1 wiring: ToR
// uplinks into their PoD's OCS-Agg, Agg boundary ports into the OCS-Core; mFabric's regional
// NICs; Opus rails).

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "config/config_parts.hpp"
#include "drivers/xc_table.hpp"

namespace loom::config_parts {

namespace {

bool read_credentials(table_reader& o, const std::string& path, ocs_device& dev) {
  auto login = read_login_file(path);
  if (!login.error.empty()) {
    o.error("credentials", login.error);
    return false;
  }
  dev.user = login.user;
  dev.password = login.password;
  return true;
}

class fabric_reader {
public:
  fabric_reader(fabric_config& out, const id_registry& node_ids, std::string config_dir)
    : out_(out), node_ids_(node_ids), config_dir_(std::move(config_dir)) {}

  void read(table_reader& fb) {
    if (auto kind = one_of<fabric_kind>(fb, "kind", fb.required<std::string>("kind")))
      out_.kind = *kind;
    if (auto v = positive(fb, "link_gbps", fb.required<double>("link_gbps")))
      out_.link_gbps = *v;
    if (auto v = at_least<int64_t>(fb, "nics_per_server", fb.required<int64_t>("nics_per_server"),
                                   1))
      out_.nics_per_server = static_cast<int>(*v);
    for (auto& p : fb.table_array("pods"))
      read_pod(p);
    for (auto& t : fb.table_array("tors"))
      read_tor(t);
    for (auto& o : fb.table_array("ocs"))
      read_ocs(o);
    for (auto& l : fb.table_array("links"))
      read_link(l);
    fb.reject_unknown();
  }

private:
  /// Port usage per device, for range checks and the one-link-per-port rule.
  struct device_ports {
    bool valid = false;            // false: the device's entry had errors, already reported
    int ports = 0;
    std::map<int, int> linked_at;  // port -> line of the link using it
    std::optional<ocs_tier> tier;  // nothing: a ToR
    std::string pod;
    std::string_view role() const { return tier ? to_string(*tier) : "ToR"; }
  };

  void read_pod(table_reader& p) {
    auto id = p.required<std::string>("id");
    auto servers = p.required<std::vector<std::string>>("servers");
    p.reject_unknown();
    if (!id || !pod_ids_.add(p, "id", *id))
      return;
    pod entry{*id, {}};
    for (auto& pattern : servers ? *servers : std::vector<std::string>{})
      for (auto& s : expand(p, "servers", pattern)) {
        if (!node_ids_.contains(s)) {
          p.error("servers", fmt::format("server '{}' is not a node of the cluster", s));
          continue;
        }
        auto [it, fresh] = server_pod_.emplace(s, *id);
        if (!fresh) {
          p.error("servers", fmt::format("server '{}' is already in PoD '{}'", s, it->second));
          continue;
        }
        entry.servers.push_back(s);
      }
    out_.pods.push_back(std::move(entry));
  }

  /// A ToR's rack: the servers of its PoD it serves (several ToRs per rail per PoD), or
  /// every server of the PoD when it lists none. False after reporting a server elsewhere.
  bool read_rack(table_reader& t, const std::optional<std::string>& pod_id,
                 std::vector<std::string>& rack) {
    bool ok = true;
    if (auto listed = t.optional<std::vector<std::string>>("servers", {}); listed && pod_id)
      for (auto& pattern : *listed)
        for (auto& s : expand(t, "servers", pattern)) {
          auto it = server_pod_.find(s);
          if (it == server_pod_.end() || it->second != *pod_id) {
            t.error("servers", fmt::format("server '{}' is not in PoD '{}'", s, *pod_id));
            ok = false;
          }
          rack.push_back(s);
        }
    return ok;
  }

  /// Each server NIC hangs off one ToR.
  void claim_nics(table_reader& t, const tor& entry) {
    for (auto& p : out_.pods) {
      if (p.id != entry.pod)
        continue;
      for (auto& server : p.servers) {
        if (!entry.servers.empty()
            && std::find(entry.servers.begin(), entry.servers.end(), server) == entry.servers.end())
          continue;
        auto [it, fresh] = nic_tor_.emplace(std::pair{server, entry.rail}, entry.id);
        if (!fresh)
          t.error("servers", fmt::format("NIC {} of server '{}' already hangs off ToR '{}'",
                                         entry.rail, server, it->second));
      }
    }
  }

  void read_tor(table_reader& t) {
    auto id = t.required<std::string>("id");
    auto pod_id = t.required<std::string>("pod");
    if (pod_id && !pod_ids_.contains(*pod_id)) {
      t.error("pod", fmt::format("'{}' names no PoD", *pod_id));
      pod_id.reset();
    }
    auto rail = at_least<int64_t>(t, "rail", t.required<int64_t>("rail"), 0);
    if (rail && out_.nics_per_server > 0 && *rail >= out_.nics_per_server) {
      t.error("rail", fmt::format("rail {} does not exist (nics_per_server = {})", *rail,
                                  out_.nics_per_server));
      rail.reset();
    }
    auto nports = within<int64_t>(t, "ports", t.required<int64_t>("ports"), 1,
                                  int64_t{max_switch_ports});
    std::vector<std::string> rack;
    bool rack_ok = read_rack(t, pod_id, rack);
    t.reject_unknown();
    if (!id)
      return;
    for (auto& one : expand(t, "id", *id)) {
      if (!device_ids_.add(t, "id", one))
        continue;
      bool valid = pod_id && rail && nports && rack_ok;
      ports_[one] = {valid, static_cast<int>(nports.value_or(0)), {}, std::nullopt,
                     pod_id.value_or("")};
      if (!valid)
        continue;
      tor entry{one, *pod_id, static_cast<int>(*rail), static_cast<int>(*nports), rack};
      claim_nics(t, entry);
      out_.tors.push_back(std::move(entry));
    }
  }

  /// agg and regional devices serve one PoD, rail devices one rail; others neither.
  bool read_device_place(table_reader& o, ocs_device& dev, bool tier_known) {
    bool ok = true;
    auto pod_id = o.optional<std::string>("pod", "");
    auto rail = o.optional<int64_t>("rail", -1);
    if (!tier_known)
      return ok;
    const bool wants_pod = dev.tier == ocs_tier::agg || dev.tier == ocs_tier::regional;
    if (pod_id && wants_pod) {
      if (pod_id->empty())
        o.error("pod", fmt::format("missing required key for tier '{}'", dev.tier));
      else if (!pod_ids_.contains(*pod_id))
        o.error("pod", fmt::format("'{}' names no PoD", *pod_id));
      else
        dev.pod = *pod_id;
      ok &= !dev.pod.empty();
    } else if (pod_id && !pod_id->empty()) {
      o.error("pod", fmt::format("a '{}' device serves no single PoD", dev.tier));
      ok = false;
    }
    if (rail && dev.tier == ocs_tier::rail) {
      if (*rail < 0 || (out_.nics_per_server > 0 && *rail >= out_.nics_per_server)) {
        o.error("rail", fmt::format("missing or invalid rail {} (rails 0..{})", *rail,
                                    out_.nics_per_server - 1));
        ok = false;
      }
      dev.rail = static_cast<int>(*rail);
    } else if (rail && *rail != -1) {
      o.error("rail", fmt::format("a '{}' device serves no single rail", dev.tier));
      ok = false;
    }
    return ok;
  }

  /// Ports, technology and its reconfiguration delay (OrchestrRL Table 2 unless overridden).
  bool read_device_switch(table_reader& o, ocs_device& dev) {
    bool ok = true;
    // A switch side holds at most max_switch_ports: the bound every driver enforces.
    auto nports = within<int64_t>(o, "ports", o.required<int64_t>("ports"), 1,
                                  int64_t{max_switch_ports});
    ok &= nports.has_value();
    dev.ports = static_cast<int>(nports.value_or(0));
    std::vector<std::pair<std::string_view, ocs_technology>> techs;
    for (auto& t : ocs_technologies())
      techs.emplace_back(t.name, t.technology);
    auto tech = one_of(o, "technology", o.optional<std::string>("technology", "mems"), techs);
    ok &= tech.has_value();
    if (tech) {
      dev.technology = *tech;
      for (auto& t : ocs_technologies())
        if (t.technology == *tech)
          dev.reconfig_ms = t.reconfig_ms;
    }
    if (auto ms = non_negative(o, "reconfig_ms", o.optional<double>("reconfig_ms", dev.reconfig_ms)))
      dev.reconfig_ms = *ms;
    else
      ok = false;
    if (auto ms = non_negative(o, "link_up_ms", o.optional<double>("link_up_ms", 0.0)))
      dev.link_up_ms = *ms;
    else
      ok = false;
    return ok;
  }

  bool read_device_driver(table_reader& o, ocs_device& dev) {
    auto driver = one_of<driver_kind>(o, "driver", o.optional<std::string>("driver", "emulated"));
    dev.driver = driver.value_or(driver_kind::emulated);
    if (!driver || *driver == driver_kind::emulated)
      return driver.has_value();
    if (*driver == driver_kind::zmq)
      return read_patience(o, dev); // the agent has the switch's address and login
    return read_tl1(o, dev);
  }

  /// Where the switch's TL1 agent listens, how to log in, and how long to wait for it.
  bool read_tl1(table_reader& o, ocs_device& dev) {
    bool ok = true;
    auto addr = o.required<std::string>("address");
    if (addr && (!valid_host_port(*addr) || addr->ends_with(":0"))) {
      o.error("address", fmt::format("'{}' is not HOST:PORT with a port in 1..65535", *addr));
      addr.reset();
    }
    dev.address = addr.value_or("");
    ok &= addr.has_value();
    auto credentials = o.required<std::string>("credentials");
    ok &= credentials && read_credentials(o, resolve_path(config_dir_, *credentials), dev);
    return read_patience(o, dev) && ok;
  }

  /// How long one command may take and how often an operation is tried (TL1: by the driver;
  /// an agent: by the agent, the service waiting for all of them).
  bool read_patience(table_reader& o, ocs_device& dev) {
    bool ok = true;
    if (auto v = within<int64_t>(o, "timeout_ms", o.optional<int64_t>("timeout_ms", 2000), 1,
                                 600'000))
      dev.timeout_ms = int(*v);
    else
      ok = false;
    if (auto v = within<int64_t>(o, "attempts", o.optional<int64_t>("attempts", 3), 1, 100))
      dev.attempts = int(*v);
    else
      ok = false;
    return ok;
  }

  /// Failed ports (checked once the port count is known), and the NICs each server gives a
  /// regional OCS (mFabric §4.2).
  bool read_device_ports(table_reader& o, ocs_device& dev, bool tier_known) {
    bool ok = true;
    if (auto masked = o.optional<std::vector<int64_t>>("masked_ports", {}))
      for (auto p : *masked) {
        if (dev.ports > 0 && (p < 1 || p > dev.ports)) {
          o.error("masked_ports", fmt::format("port {} does not exist (ports 1..{})", p, dev.ports));
          ok = false;
        }
        dev.masked_ports.push_back(static_cast<int>(p));
      }
    if (auto managed = o.optional<std::vector<int64_t>>("managed_ports", {}))
      for (auto p : *managed) {
        if (dev.ports > 0 && (p < 1 || p > dev.ports)) {
          o.error("managed_ports",
                  fmt::format("port {} does not exist (ports 1..{})", p, dev.ports));
          ok = false;
        }
        dev.managed_ports.push_back(static_cast<int>(p));
      }
    auto nics = o.optional<std::vector<int64_t>>("nics", {});
    if (!nics)
      return false;
    if (tier_known && dev.tier == ocs_tier::regional && nics->empty()) {
      o.error("nics", "a regional OCS needs the NICs each server gives it (mFabric §4.2)");
      ok = false;
    } else if (tier_known && dev.tier != ocs_tier::regional && !nics->empty()) {
      o.error("nics", fmt::format("only regional devices take server NICs, not '{}'", dev.tier));
      ok = false;
    }
    for (auto n : *nics) {
      if (n < 0 || (out_.nics_per_server > 0 && n >= out_.nics_per_server)) {
        o.error("nics", fmt::format("NIC {} does not exist (NICs 0..{})", n,
                                    out_.nics_per_server - 1));
        ok = false;
      }
      dev.nics.push_back(static_cast<int>(n));
    }
    return ok;
  }

  void read_ocs(table_reader& o) {
    ocs_device dev;
    auto id = o.required<std::string>("id");
    auto tier = one_of<ocs_tier>(o, "tier", o.required<std::string>("tier"));
    bool ok = tier.has_value();
    if (tier)
      dev.tier = *tier;
    ok &= read_device_place(o, dev, tier.has_value());
    ok &= read_device_switch(o, dev);
    ok &= read_device_driver(o, dev);
    ok &= read_device_ports(o, dev, tier.has_value());
    o.reject_unknown();
    if (!id)
      return;
    for (auto& one : expand(o, "id", *id)) {
      if (!device_ids_.add(o, "id", one))
        continue;
      ports_[one] = {ok, dev.ports, {}, dev.tier, dev.pod};
      if (!ok)
        continue;
      dev.id = one;
      out_.ocs.push_back(dev);
    }
  }

  /// DEVICE:PORT of a link end, on a device that exists, within its ports, not yet linked.
  std::optional<port_ref> read_link_end(table_reader& l, std::string_view key,
                                        const std::string& text) {
    auto colon = text.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !parse_port(std::string_view{text}.substr(colon + 1), port)) {
      l.error(key, fmt::format("'{}' is not DEVICE:PORT", text));
      return std::nullopt;
    }
    port_ref out{text.substr(0, colon), port};
    auto dev = ports_.find(out.device);
    if (dev == ports_.end()) {
      l.error(key, fmt::format("'{}' names no ToR or OCS device", out.device));
      return std::nullopt;
    }
    if (!dev->second.valid)
      return std::nullopt;
    if (port < 1 || port > dev->second.ports) {
      l.error(key, fmt::format("port {} does not exist on '{}' (ports 1..{})", port, out.device,
                               dev->second.ports));
      return std::nullopt;
    }
    auto [it, fresh] = dev->second.linked_at.emplace(port, l.line_of(key));
    if (!fresh) {
      l.error(key, fmt::format("port {} of '{}' is already linked at line {}", port, out.device,
                               it->second));
      return std::nullopt;
    }
    return out;
  }

  /// RFabric §5.1 wiring: ToR uplinks into their PoD's OCS-Agg, Agg boundary ports into the
  /// OCS-Core.
  bool wired_as_rfabric(table_reader& l, const fabric_link& link) {
    auto& a = ports_[link.a.device];
    auto& b = ports_[link.b.device];
    auto joins = [&](std::optional<ocs_tier> x, std::optional<ocs_tier> y) {
      return (a.tier == x && b.tier == y) || (a.tier == y && b.tier == x);
    };
    bool uplink = joins(std::nullopt, ocs_tier::agg) && a.pod == b.pod;
    bool boundary = joins(ocs_tier::agg, ocs_tier::core);
    if (uplink || boundary)
      return true;
    l.error("to", fmt::format("a link joins a ToR to its PoD's OCS-Agg or an OCS-Agg to an "
                              "OCS-Core, not {} '{}' to {} '{}'",
                              a.role(), link.a.device, b.role(), link.b.device));
    return false;
  }

  void read_link(table_reader& l) {
    auto from = l.required<std::string>("from");
    auto to = l.required<std::string>("to");
    l.reject_unknown();
    if (!from || !to)
      return;
    auto as = expand(l, "from", *from);
    auto bs = expand(l, "to", *to);
    if (as.empty() || bs.empty())
      return;
    if (as.size() != bs.size()) {
      l.error("to", fmt::format("'{}' names {} ports but 'from' names {}; ranges must match",
                                *to, bs.size(), as.size()));
      return;
    }
    for (size_t i = 0; i < as.size(); ++i) {
      auto a = read_link_end(l, "from", as[i]);
      auto b = read_link_end(l, "to", bs[i]);
      if (!a || !b)
        continue;
      fabric_link link{*a, *b};
      if (wired_as_rfabric(l, link))
        out_.links.push_back(std::move(link));
    }
  }

  fabric_config& out_;
  const id_registry& node_ids_;
  id_registry pod_ids_{"PoD"};
  id_registry device_ids_{"device"};
  std::map<std::string, std::string> server_pod_;
  std::map<std::string, device_ports> ports_;
  std::map<std::pair<std::string, int>, std::string> nic_tor_; // (server, rail) -> ToR
  std::string config_dir_; // credentials files are relative to it
};

} // namespace

void read_fabric(table_reader& root, config& cfg, const id_registry& node_ids,
                 const std::string& config_dir) {
  if (auto fb = root.table("fabric"))
    fabric_reader{cfg.fabric, node_ids, config_dir}.read(*fb);
}

} // namespace loom::config_parts
