#include "core/config.hpp"

#include <charconv>
#include <filesystem>
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/expand.hpp"
#include "core/toml_reader.hpp"

namespace loom {

std::string_view to_string(log_level x) {
  switch (x) {
    case log_level::trace: return "trace";
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warn";
    case log_level::error: return "error";
  }
  return "info";
}

std::string_view to_string(fabric_kind x) {
  switch (x) {
    case fabric_kind::none: return "none";
    case fabric_kind::rfabric: return "rfabric";
    case fabric_kind::mfabric: return "mfabric";
    case fabric_kind::opus: return "opus";
  }
  return "none";
}

std::string_view to_string(ocs_tier x) {
  switch (x) {
    case ocs_tier::agg: return "agg";
    case ocs_tier::core: return "core";
    case ocs_tier::regional: return "regional";
    case ocs_tier::rail: return "rail";
  }
  return "agg";
}

std::string_view to_string(driver_kind x) {
  switch (x) {
    case driver_kind::emulated: return "emulated";
    case driver_kind::tl1: return "tl1";
    case driver_kind::zmq: return "zmq";
  }
  return "emulated";
}

namespace {

std::vector<std::string> expand(table_reader& r, std::string_view key, const std::string& s) {
  auto result = expand_range(s);
  if (auto* msg = std::get_if<std::string>(&result)) {
    r.error(key, *msg);
    return {};
  }
  return std::get<std::vector<std::string>>(std::move(result));
}

bool parse_port(std::string_view s, int& port) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

/// "host:port" with a port in [0, 65535] (0 = any free port).
bool valid_host_port(std::string_view s) {
  auto colon = s.rfind(':');
  int port = 0;
  return colon != std::string_view::npos && colon > 0
         && parse_port(s.substr(colon + 1), port) && port >= 0 && port <= 65535;
}

/// ZeroMQ endpoints Loom binds: tcp://host:port, ipc://path, inproc://name.
bool valid_zmq_endpoint(std::string_view s) {
  if (s.rfind("tcp://", 0) == 0)
    return valid_host_port(s.substr(6));
  return (s.rfind("ipc://", 0) == 0 && s.size() > 6)
         || (s.rfind("inproc://", 0) == 0 && s.size() > 9);
}

/// Remembers where each id was first defined, to name it in duplicate errors.
class id_registry {
public:
  explicit id_registry(std::string_view what) : what_(what) {}

  bool add(table_reader& r, std::string_view key, const std::string& id) {
    auto [it, fresh] = first_line_.emplace(id, r.line_of(key));
    if (!fresh)
      r.error(key, fmt::format("duplicate {} id '{}' (first defined at line {})", what_, id,
                               it->second));
    return fresh;
  }

  bool contains(const std::string& id) const { return first_line_.count(id) > 0; }

private:
  std::string_view what_;
  std::map<std::string, int> first_line_;
};

// -- sections --------------------------------------------------------------------------------

void read_service(table_reader& root, config& cfg) {
  auto svc = root.table("service");
  if (!svc)
    return;
  if (auto name = svc->optional<std::string>("name", "loom"))
    cfg.service_name = *name;
  auto level = one_of<log_level>(*svc, "log_level",
                                 svc->optional<std::string>("log_level", "info"),
                                 {{"trace", log_level::trace},
                                  {"debug", log_level::debug},
                                  {"info", log_level::info},
                                  {"warn", log_level::warn},
                                  {"error", log_level::error}});
  if (level)
    cfg.level = *level;
  svc->reject_unknown();
}

void read_endpoints(table_reader& root, config& cfg) {
  auto ep = root.required_table("endpoints");
  if (!ep)
    return;
  if (auto gw = ep->required<std::string>("gateway")) {
    if (valid_zmq_endpoint(*gw))
      cfg.endpoints.gateway = *gw;
    else
      ep->error("gateway", fmt::format("'{}' is not a ZeroMQ endpoint (tcp://HOST:PORT, "
                                       "ipc://PATH or inproc://NAME)",
                                       *gw));
  }
  if (auto m = ep->required<std::string>("metrics")) {
    if (valid_host_port(*m))
      cfg.endpoints.metrics = *m;
    else
      ep->error("metrics", fmt::format("'{}' is not HOST:PORT with a port in 0..65535", *m));
  }
  ep->reject_unknown();
}

void read_security(table_reader& root, config& cfg, const std::string& config_dir) {
  auto sec = root.table("security");
  if (!sec)
    return;
  auto& out = cfg.security;
  if (auto v = sec->optional<bool>("insecure", false))
    out.insecure = *v;
  auto resolve = [&](const std::string& path) {
    return path.empty() || path.front() == '/' || config_dir.empty()
             ? path
             : (std::filesystem::path{config_dir} / path).string();
  };
  if (auto v = sec->optional<std::string>("keys_dir", ""))
    out.keys_dir = resolve(*v);
  if (auto v = at_least<int64_t>(*sec, "heartbeat_ms",
                                 sec->optional<int64_t>("heartbeat_ms", out.heartbeat_ms), 10))
    out.heartbeat_ms = uint32_t(*v);
  if (auto v = at_least<int64_t>(*sec, "heartbeat_misses",
                                 sec->optional<int64_t>("heartbeat_misses", out.heartbeat_misses),
                                 1))
    out.heartbeat_misses = uint32_t(*v);
  if (auto clients = sec->table("clients")) {
    for (auto role : {"rollout", "train", "gen-instance", "collective-shim", "ocs-agent", "admin"})
      if (auto files = clients->optional<std::vector<std::string>>(role, {}))
        for (auto& f : *files)
          out.clients[role].push_back(resolve(f));
    clients->reject_unknown();
  }
  sec->reject_unknown();
}

void read_storage(table_reader& root, config& cfg) {
  auto st = root.required_table("storage");
  if (!st)
    return;
  if (auto path = st->required<std::string>("path")) {
    if (path->empty())
      st->error("path", "must not be empty");
    else
      cfg.storage.path = *path;
  }
  if (auto sync = st->optional<bool>("sync_writes", true))
    cfg.storage.sync_writes = *sync;
  st->reject_unknown();
}

void read_gpus(table_reader& cl, cluster& out) {
  out.gpus = builtin_gpus();
  for (auto& [name, g] : cl.named_tables("gpus")) {
    auto builtin = find_builtin_gpu(name);
    gpu_spec spec = builtin ? *builtin : gpu_spec{name};
    // A new type must give every field; a built-in type may override any.
    auto field = [&, &g = g](std::string_view key, double current) {
      auto v = builtin ? g.optional<double>(key, current) : g.required<double>(key);
      return key == "cost_per_gpu_hour" ? non_negative(g, key, v) : positive(g, key, v);
    };
    if (auto v = field("bf16_tflops", spec.bf16_tflops))
      spec.bf16_tflops = *v;
    if (auto v = field("hbm_gb", spec.hbm_gb))
      spec.hbm_gb = *v;
    if (auto v = field("hbm_tbps", spec.hbm_tbps))
      spec.hbm_tbps = *v;
    if (auto v = field("nvlink_gbps", spec.nvlink_gbps))
      spec.nvlink_gbps = *v;
    if (auto v = field("cost_per_gpu_hour", spec.cost_per_gpu_hour))
      spec.cost_per_gpu_hour = *v;
    g.reject_unknown();
    if (builtin) {
      for (auto& existing : out.gpus)
        if (existing.name == name)
          existing = spec;
    } else {
      out.gpus.push_back(spec);
    }
  }
}

void read_pool(table_reader& cl, std::string_view key, pool_kind pool, cluster& out,
               id_registry& node_ids) {
  // Ids are registered even when another field of the entry is wrong, so that references to
  // them elsewhere (PoD servers) do not repeat the entry's own error.
  auto entries = cl.table_array(key);
  if (entries.empty() && cl.path() == "cluster") {
    cl.error(key, fmt::format("the {} pool needs at least one [[{}]] node entry",
                              to_string(pool), cl.key_path(key)));
  }
  auto& nodes = pool == pool_kind::rollout ? out.rollout : out.training;
  for (auto& e : entries) {
    auto id = e.required<std::string>("id");
    auto gpu = e.required<std::string>("gpu");
    if (gpu && !out.find_gpu(*gpu)) {
      std::string known;
      for (auto& g : out.gpus)
        known += (known.empty() ? "" : ", ") + g.name;
      e.error("gpu", fmt::format("unknown GPU type '{}' (known: {}; add [cluster.gpus.{}])",
                                 *gpu, known, *gpu));
      gpu.reset();
    }
    auto gpus = at_least<int64_t>(e, "gpus", e.required<int64_t>("gpus"), 1);
    if (gpus && *gpus > 1024) {
      e.error("gpus", fmt::format("must be at most 1024 per node, got {}", *gpus));
      gpus.reset();
    }
    auto mem = positive(e, "host_memory_gb", e.required<double>("host_memory_gb"));
    e.reject_unknown();
    if (!id)
      continue;
    for (auto& one : expand(e, "id", *id)) {
      if (!node_ids.add(e, "id", one) || !gpu || !gpus || !mem)
        continue;
      nodes.push_back(node{one, pool, *gpu, static_cast<int>(*gpus), *mem});
    }
  }
}

void read_cluster(table_reader& root, config& cfg, id_registry& node_ids) {
  auto cl = root.required_table("cluster");
  if (!cl)
    return;
  auto& out = cfg.cluster;
  if (auto name = cl->required<std::string>("name"))
    out.name = *name;
  if (auto bw = positive(*cl, "cross_link_gbps", cl->required<double>("cross_link_gbps")))
    out.cross_link_gbps = *bw;
  read_gpus(*cl, out);
  read_pool(*cl, "rollout", pool_kind::rollout, out, node_ids);
  read_pool(*cl, "training", pool_kind::training, out, node_ids);
  cl->reject_unknown();
}

/// Port usage per device, for range checks and the one-link-per-port rule.
struct port_table {
  struct device_ports {
    bool valid = false; // false: the device's entry had errors, already reported
    int ports = 0;
    std::map<int, int> linked_at; // port -> line of the link using it
    std::string role;             // "ToR" or the OCS tier
    std::string pod;
  };
  std::map<std::string, device_ports> devices;
};

void read_link_endpoint(table_reader& l, std::string_view key, const std::string& text,
                        port_table& ports, port_ref& out, bool& ok) {
  auto colon = text.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !parse_port(std::string_view{text}.substr(colon + 1), port)) {
    l.error(key, fmt::format("'{}' is not DEVICE:PORT", text));
    ok = false;
    return;
  }
  out = port_ref{text.substr(0, colon), port};
  auto dev = ports.devices.find(out.device);
  if (dev == ports.devices.end()) {
    l.error(key, fmt::format("'{}' names no ToR or OCS device", out.device));
    ok = false;
    return;
  }
  if (!dev->second.valid) {
    ok = false;
    return;
  }
  if (port < 1 || port > dev->second.ports) {
    l.error(key, fmt::format("port {} does not exist on '{}' (ports 1..{})", port, out.device,
                             dev->second.ports));
    ok = false;
    return;
  }
  auto [it, fresh] = dev->second.linked_at.emplace(port, l.line_of(key));
  if (!fresh) {
    l.error(key, fmt::format("port {} of '{}' is already linked at line {}", port, out.device,
                             it->second));
    ok = false;
  }
}

void read_fabric(table_reader& root, config& cfg, const id_registry& node_ids) {
  auto fb = root.table("fabric");
  if (!fb)
    return;
  auto& out = cfg.fabric;
  auto kind = one_of<fabric_kind>(*fb, "kind", fb->required<std::string>("kind"),
                                  {{"none", fabric_kind::none},
                                   {"rfabric", fabric_kind::rfabric},
                                   {"mfabric", fabric_kind::mfabric},
                                   {"opus", fabric_kind::opus}});
  if (kind)
    out.kind = *kind;
  if (auto v = positive(*fb, "link_gbps", fb->required<double>("link_gbps")))
    out.link_gbps = *v;
  if (auto v = at_least<int64_t>(*fb, "nics_per_server", fb->required<int64_t>("nics_per_server"),
                                 1))
    out.nics_per_server = static_cast<int>(*v);

  id_registry pod_ids{"PoD"};
  std::map<std::string, std::string> server_pod;
  for (auto& p : fb->table_array("pods")) {
    auto id = p.required<std::string>("id");
    auto servers = p.required<std::vector<std::string>>("servers");
    p.reject_unknown();
    if (!id || !pod_ids.add(p, "id", *id))
      continue;
    pod entry{*id, {}};
    for (auto& pattern : servers ? *servers : std::vector<std::string>{}) {
      for (auto& s : expand(p, "servers", pattern)) {
        if (!node_ids.contains(s)) {
          p.error("servers", fmt::format("server '{}' is not a node of the cluster", s));
          continue;
        }
        auto [it, fresh] = server_pod.emplace(s, *id);
        if (!fresh) {
          p.error("servers", fmt::format("server '{}' is already in PoD '{}'", s, it->second));
          continue;
        }
        entry.servers.push_back(s);
      }
    }
    out.pods.push_back(std::move(entry));
  }

  id_registry device_ids{"device"};
  port_table ports;
  std::map<std::pair<std::string, int64_t>, std::string> nic_tor; // (server, rail) -> ToR
  for (auto& t : fb->table_array("tors")) {
    auto id = t.required<std::string>("id");
    auto pod_id = t.required<std::string>("pod");
    if (pod_id && !pod_ids.contains(*pod_id)) {
      t.error("pod", fmt::format("'{}' names no PoD", *pod_id));
      pod_id.reset();
    }
    auto rail = at_least<int64_t>(t, "rail", t.required<int64_t>("rail"), 0);
    if (rail && out.nics_per_server > 0 && *rail >= out.nics_per_server) {
      t.error("rail", fmt::format("rail {} does not exist (nics_per_server = {})", *rail,
                                  out.nics_per_server));
      rail.reset();
    }
    auto nports = at_least<int64_t>(t, "ports", t.required<int64_t>("ports"), 1);
    // A rack: the ToR serves these servers of its PoD only (several ToRs per rail per PoD).
    std::vector<std::string> rack;
    bool rack_ok = true;
    if (auto listed = t.optional<std::vector<std::string>>("servers", {}); listed && pod_id)
      for (auto& pattern : *listed)
        for (auto& s : expand(t, "servers", pattern)) {
          auto it = server_pod.find(s);
          if (it == server_pod.end() || it->second != *pod_id) {
            t.error("servers", fmt::format("server '{}' is not in PoD '{}'", s, *pod_id));
            rack_ok = false;
          }
          rack.push_back(s);
        }
    t.reject_unknown();
    if (!id)
      continue;
    for (auto& one : expand(t, "id", *id)) {
      if (!device_ids.add(t, "id", one))
        continue;
      bool valid = pod_id && rail && nports && rack_ok;
      ports.devices[one] = {valid, static_cast<int>(nports.value_or(0)), {}, "ToR",
                            pod_id.value_or("")};
      // Each server NIC hangs off one ToR.
      if (valid)
        for (auto& sv : out.pods)
          if (sv.id == *pod_id)
            for (auto& server : sv.servers)
              if (rack.empty() || std::find(rack.begin(), rack.end(), server) != rack.end()) {
                auto [it, fresh] = nic_tor.emplace(std::pair{server, *rail}, one);
                if (!fresh)
                  t.error("servers", fmt::format("NIC {} of server '{}' already hangs off ToR "
                                                 "'{}'", *rail, server, it->second));
              }
      if (valid)
        out.tors.push_back(
          tor{one, *pod_id, static_cast<int>(*rail), static_cast<int>(*nports), rack});
    }
  }

  std::vector<std::pair<std::string_view, ocs_tier>> tiers{{"agg", ocs_tier::agg},
                                                           {"core", ocs_tier::core},
                                                           {"regional", ocs_tier::regional},
                                                           {"rail", ocs_tier::rail}};
  std::vector<std::pair<std::string_view, ocs_technology>> techs;
  for (auto& t : ocs_technologies())
    techs.emplace_back(t.name, t.technology);
  for (auto& o : fb->table_array("ocs")) {
    ocs_device dev;
    bool ok = true;
    auto id = o.required<std::string>("id");
    auto tier = one_of(o, "tier", o.required<std::string>("tier"), tiers);
    ok &= tier.has_value();
    if (tier)
      dev.tier = *tier;
    // agg and regional devices serve one PoD, rail devices one rail; others neither.
    auto pod_id = o.optional<std::string>("pod", "");
    auto rail = o.optional<int64_t>("rail", -1);
    bool wants_pod = tier && (*tier == ocs_tier::agg || *tier == ocs_tier::regional);
    bool wants_rail = tier && *tier == ocs_tier::rail;
    if (pod_id && wants_pod) {
      if (pod_id->empty())
        o.error("pod", fmt::format("missing required key for tier '{}'", to_string(*tier)));
      else if (!pod_ids.contains(*pod_id))
        o.error("pod", fmt::format("'{}' names no PoD", *pod_id));
      else
        dev.pod = *pod_id;
      ok &= !dev.pod.empty();
    } else if (pod_id && tier && !pod_id->empty()) {
      o.error("pod", fmt::format("a '{}' device serves no single PoD", to_string(*tier)));
      ok = false;
    }
    if (rail && wants_rail) {
      if (*rail < 0 || (out.nics_per_server > 0 && *rail >= out.nics_per_server)) {
        o.error("rail", fmt::format("missing or invalid rail {} (rails 0..{})", *rail,
                                    out.nics_per_server - 1));
        ok = false;
      }
      dev.rail = static_cast<int>(*rail);
    } else if (rail && tier && *rail != -1) {
      o.error("rail", fmt::format("a '{}' device serves no single rail", to_string(*tier)));
      ok = false;
    }
    auto nports = at_least<int64_t>(o, "ports", o.required<int64_t>("ports"), 1);
    ok &= nports.has_value();
    dev.ports = static_cast<int>(nports.value_or(0));
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
    auto driver = one_of<driver_kind>(o, "driver", o.optional<std::string>("driver", "emulated"),
                                      {{"emulated", driver_kind::emulated},
                                       {"tl1", driver_kind::tl1},
                                       {"zmq", driver_kind::zmq}});
    ok &= driver.has_value();
    dev.driver = driver.value_or(driver_kind::emulated);
    if (driver && *driver != driver_kind::emulated) {
      auto addr = o.required<std::string>("address");
      if (addr && *driver == driver_kind::tl1 && !valid_host_port(*addr)) {
        o.error("address", fmt::format("'{}' is not HOST:PORT", *addr));
        addr.reset();
      }
      ok &= addr.has_value();
      dev.address = addr.value_or("");
    }
    if (auto masked = o.optional<std::vector<int64_t>>("masked_ports", {})) {
      for (auto p : *masked) {
        if (nports && (p < 1 || p > *nports)) {
          o.error("masked_ports",
                  fmt::format("port {} does not exist (ports 1..{})", p, *nports));
          ok = false;
        }
        dev.masked_ports.push_back(static_cast<int>(p));
      }
    }
    if (auto nics = o.optional<std::vector<int64_t>>("nics", {})) {
      if (tier && *tier == ocs_tier::regional && nics->empty()) {
        o.error("nics", "a regional OCS needs the NICs each server gives it (mFabric §4.2)");
        ok = false;
      } else if (tier && *tier != ocs_tier::regional && !nics->empty()) {
        o.error("nics", fmt::format("only regional devices take server NICs, not '{}'",
                                    to_string(*tier)));
        ok = false;
      }
      for (auto n : *nics) {
        if (n < 0 || (out.nics_per_server > 0 && n >= out.nics_per_server)) {
          o.error("nics", fmt::format("NIC {} does not exist (NICs 0..{})", n,
                                      out.nics_per_server - 1));
          ok = false;
        }
        dev.nics.push_back(static_cast<int>(n));
      }
    }
    o.reject_unknown();
    if (!id)
      continue;
    for (auto& one : expand(o, "id", *id)) {
      if (!device_ids.add(o, "id", one))
        continue;
      ports.devices[one] = {ok, dev.ports, {}, std::string{to_string(dev.tier)}, dev.pod};
      if (!ok)
        continue;
      dev.id = one;
      out.ocs.push_back(dev);
    }
  }

  for (auto& l : fb->table_array("links")) {
    auto from = l.required<std::string>("from");
    auto to = l.required<std::string>("to");
    l.reject_unknown();
    if (!from || !to)
      continue;
    auto as = expand(l, "from", *from);
    auto bs = expand(l, "to", *to);
    if (as.empty() || bs.empty())
      continue;
    if (as.size() != bs.size()) {
      l.error("to", fmt::format("'{}' names {} ports but 'from' names {}; ranges must match",
                                *to, bs.size(), as.size()));
      continue;
    }
    for (size_t i = 0; i < as.size(); ++i) {
      fabric_link link;
      bool ok = true;
      read_link_endpoint(l, "from", as[i], ports, link.a, ok);
      read_link_endpoint(l, "to", bs[i], ports, link.b, ok);
      if (!ok)
        continue;
      // RFabric §5.1 wiring: ToR uplinks into their PoD's OCS-Agg, Agg boundary ports into
      // the OCS-Core.
      auto& a = ports.devices[link.a.device];
      auto& b = ports.devices[link.b.device];
      auto joins = [&](std::string_view x, std::string_view y) {
        return (a.role == x && b.role == y) || (a.role == y && b.role == x);
      };
      bool uplink = joins("ToR", "agg") && a.pod == b.pod;
      bool boundary = joins("agg", "core");
      if (!uplink && !boundary) {
        l.error("to", fmt::format("a link joins a ToR to its PoD's OCS-Agg or an OCS-Agg to an "
                                  "OCS-Core, not {} '{}' to {} '{}'", a.role, link.a.device,
                                  b.role, link.b.device));
        continue;
      }
      out.links.push_back(std::move(link));
    }
  }
  fb->reject_unknown();
}

void read_policy(table_reader& root, config& cfg) {
  auto pol = root.table("policy");
  if (!pol)
    return;
  auto& out = cfg.policy;
  if (auto w = pol->table("weave")) {
    if (auto v = fraction(*w, "tail_migration_threshold",
                          w->optional<double>("tail_migration_threshold",
                                              out.weave.tail_migration_threshold)))
      out.weave.tail_migration_threshold = *v;
    if (auto v = at_least<int64_t>(*w, "max_group_size",
                                   w->optional<int64_t>("max_group_size",
                                                        out.weave.max_group_size),
                                   1))
      out.weave.max_group_size = static_cast<int>(*v);
    if (auto v = at_least<double>(*w, "default_slo",
                                  w->optional<double>("default_slo", out.weave.default_slo), 1.0))
      out.weave.default_slo = *v;
    for (auto [key, field] : {std::pair{"warm_start_gbps_per_gpu", &weave_policy::warm_start_gbps_per_gpu},
                              std::pair{"cold_start_gbps", &weave_policy::cold_start_gbps},
                              std::pair{"intra_cluster_gbps", &weave_policy::intra_cluster_gbps}})
      if (auto v = positive(*w, key, w->optional<double>(key, out.weave.*field)))
        out.weave.*field = *v;
    for (auto [key, field] : {std::pair{"cold_start_init_s", &weave_policy::cold_start_init_s},
                              std::pair{"tail_migration_cost_s", &weave_policy::tail_migration_cost_s}})
      if (auto v = non_negative(*w, key, w->optional<double>(key, out.weave.*field)))
        out.weave.*field = *v;
    if (auto v = w->optional<bool>("topology_aware_sync", out.weave.topology_aware_sync))
      out.weave.topology_aware_sync = *v;
    w->reject_unknown();
  }
  if (auto p = pol->table("planner")) {
    if (auto v = positive(*p, "period_s", p->optional<double>("period_s", out.planner.period_s)))
      out.planner.period_s = *v;
    if (auto v = non_negative(*p, "epsilon_s",
                              p->optional<double>("epsilon_s", out.planner.epsilon_s)))
      out.planner.epsilon_s = *v;
    if (auto v = at_least<int64_t>(*p, "histogram_bin_tokens",
                                   p->optional<int64_t>("histogram_bin_tokens",
                                                        out.planner.histogram_bin_tokens),
                                   1))
      out.planner.histogram_bin_tokens = static_cast<int>(*v);
    p->reject_unknown();
  }
  if (auto b = pol->table("balancer")) {
    if (auto v = non_negative(*b, "theta", b->optional<double>("theta", out.balancer.theta)))
      out.balancer.theta = *v;
    if (auto v = positive(*b, "tick_ms", b->optional<double>("tick_ms", out.balancer.tick_ms)))
      out.balancer.tick_ms = *v;
    b->reject_unknown();
  }
  if (auto f = pol->table("fabric")) {
    if (auto v = non_negative(*f, "safe_window_margin_ms",
                              f->optional<double>("safe_window_margin_ms",
                                                  out.fabric.safe_window_margin_ms)))
      out.fabric.safe_window_margin_ms = *v;
    f->reject_unknown();
  }
  pol->reject_unknown();
}

} // namespace

config_result parse_config(std::string_view text, std::string source_name) {
  config_result result;
  auto doc = parse_toml(text, source_name, result.errors);
  if (!doc)
    return result;
  config_diagnostics diag{source_name};
  table_reader root{*doc, "", diag};
  config cfg;
  cfg.source = source_name;
  read_service(root, cfg);
  read_endpoints(root, cfg);
  read_storage(root, cfg);
  id_registry node_ids{"node"};
  read_cluster(root, cfg, node_ids);
  read_fabric(root, cfg, node_ids);
  read_security(root, cfg,
                source_name.empty() || source_name.front() == '<' ? std::string{}
                                           : std::filesystem::path{source_name}.parent_path().string());
  read_policy(root, cfg);
  root.reject_unknown();
  result.errors = diag.take_errors();
  if (result.errors.empty())
    result.value = std::move(cfg);
  return result;
}

config_result load_config_file(const std::string& path) {
  config_result result;
  if (auto text = read_text_file(path, result.errors))
    return parse_config(*text, path);
  return result;
}

} // namespace loom
