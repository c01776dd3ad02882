#include "config/config.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "config/config_parts.hpp"

namespace loom {

namespace {

using namespace config_parts;

/// ZeroMQ endpoints Loom binds: tcp://host:port, ipc://path, inproc://name.
bool valid_zmq_endpoint(std::string_view s) {
  if (s.rfind("tcp://", 0) == 0)
    return valid_host_port(s.substr(6));
  return (s.rfind("ipc://", 0) == 0 && s.size() > 6)
         || (s.rfind("inproc://", 0) == 0 && s.size() > 9);
}

/// Why a client key file would fail `serve`, or nothing: it must be a small regular file whose
/// first word is a Z85 CURVE key (40 characters of the Z85 alphabet, RFC 32).
std::optional<std::string> key_file_problem(const std::string& path) {
  std::vector<config_error> unread;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return fmt::format("key file '{}' does not exist (make it with `loom keygen`)", path);
  auto size = std::filesystem::file_size(path, ec);
  auto text = !ec && size <= 4096 ? read_text_file(path, unread) : std::nullopt;
  if (!text)
    return fmt::format("key file '{}' is not a readable key file", path);
  static constexpr std::string_view z85 =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  auto begin = text->find_first_not_of(" \t\r\n");
  auto end = text->find_first_of(" \t\r\n", begin);
  auto key = begin == std::string::npos ? std::string_view{}
                                        : std::string_view{*text}.substr(begin, end - begin);
  if (key.size() != 40 || key.find_first_not_of(z85) != std::string_view::npos)
    return fmt::format("key file '{}' does not hold a Z85 CURVE key (40 characters)", path);
  return std::nullopt;
}

/// A client key file `serve` could not load is an error now, not at start or first connection.
void check_key_files(table_reader& clients, worker_role role,
                     const std::vector<std::string>& files) {
  for (auto& f : files)
    if (auto problem = key_file_problem(f))
      clients.error(to_string(role), *problem);
}

/// Why the gateway and the metrics endpoint cannot both bind, or nothing: one TCP port on
/// overlapping addresses (the same host, or either on every interface).
std::optional<std::string> endpoint_clash(std::string_view gateway, std::string_view metrics) {
  if (gateway.rfind("tcp://", 0) != 0)
    return std::nullopt;
  auto split = [](std::string_view hp) {
    auto colon = hp.rfind(':');
    return std::pair{hp.substr(0, colon), hp.substr(colon + 1)};
  };
  auto [ghost, gport] = split(gateway.substr(6));
  auto [mhost, mport] = split(metrics);
  auto any = [](std::string_view h) { return h == "*" || h == "0.0.0.0" || h == "[::]"; };
  if (gport != mport || gport == "0" || !(ghost == mhost || any(ghost) || any(mhost)))
    return std::nullopt;
  return fmt::format("'{}' takes port {} of the gateway '{}': serve could bind only one",
                     metrics, mport, gateway);
}

// -- sections --------------------------------------------------------------------------------

void read_service(table_reader& root, config& cfg) {
  auto svc = root.table("service");
  if (!svc)
    return;
  if (auto name = svc->optional<std::string>("name", "loom"))
    cfg.service_name = *name;
  auto level = one_of<log_level>(*svc, "log_level",
                                 svc->optional<std::string>("log_level", "info"));
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
  if (auto clash = endpoint_clash(cfg.endpoints.gateway, cfg.endpoints.metrics))
    ep->error("metrics", *clash);
  ep->reject_unknown();
}

void read_security(table_reader& root, config& cfg, const std::string& config_dir) {
  auto sec = root.table("security");
  if (!sec)
    return;
  auto& out = cfg.security;
  if (auto v = sec->optional<bool>("insecure", false))
    out.insecure = *v;
  auto resolve = [&](const std::string& path) { return resolve_path(config_dir, path); };
  if (auto v = sec->optional<std::string>("keys_dir", ""))
    out.keys_dir = resolve(*v);
  // A worker is declared dead after heartbeat_ms * heartbeat_misses: at most 10 minutes each
  // and 100 misses keep that product far inside its uint32_t milliseconds.
  if (auto v = within<int64_t>(*sec, "heartbeat_ms",
                               sec->optional<int64_t>("heartbeat_ms", out.heartbeat_ms), 10,
                               600'000))
    out.heartbeat_ms = uint32_t(*v);
  if (auto v = within<int64_t>(*sec, "heartbeat_misses",
                               sec->optional<int64_t>("heartbeat_misses", out.heartbeat_misses),
                               1, 100))
    out.heartbeat_misses = uint32_t(*v);
  if (auto v = within<int64_t>(*sec, "frames_per_s_per_key",
                               sec->optional<int64_t>("frames_per_s_per_key",
                                                      out.frames_per_s_per_key),
                               0, 10'000'000))
    out.frames_per_s_per_key = uint32_t(*v);
  if (auto v = within<int64_t>(*sec, "frames_per_s_per_session",
                               sec->optional<int64_t>("frames_per_s_per_session",
                                                      out.frames_per_s_per_session),
                               0, 10'000'000))
    out.frames_per_s_per_session = uint32_t(*v);
  if (auto v = within<int64_t>(*sec, "sessions_per_key",
                               sec->optional<int64_t>("sessions_per_key", out.sessions_per_key),
                               1, 1'000'000))
    out.sessions_per_key = uint32_t(*v);
  if (auto clients = sec->table("clients")) {
    for (auto role : all_values<worker_role>())
      if (auto files = clients->optional<std::vector<std::string>>(to_string(role), {})) {
        for (auto& f : *files)
          out.clients[role].push_back(resolve(f));
        check_key_files(*clients, role, out.clients[role]);
      }
    clients->reject_unknown();
  }
  sec->reject_unknown();
}

/// A device an OCS agent drives needs a key that agent can register with.
void check_agent_keys(table_reader& root, config& cfg) {
  if (cfg.security.insecure || !cfg.security.clients[worker_role::ocs_agent].empty())
    return;
  for (auto& d : cfg.fabric.ocs)
    if (d.driver == driver_kind::zmq) {
      root.error("security", fmt::format("OCS '{}' is driven by an agent (driver = \"zmq\") but "
                                         "[security.clients] lists no ocs-agent key",
                                         d.id));
      return;
    }
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
    const auto ids = expand(e, "id", *id);
    nodes.reserve(nodes.size() + ids.size()); // a range may name 100,000 nodes
    for (auto& one : ids) {
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

void read_weave_policy(table_reader& w, weave_policy& out) {
  if (auto v = fraction(w, "tail_migration_threshold",
                        w.optional<double>("tail_migration_threshold",
                                           out.tail_migration_threshold)))
    out.tail_migration_threshold = *v;
  if (auto v = at_least<int64_t>(w, "max_group_size",
                                 w.optional<int64_t>("max_group_size", out.max_group_size), 1))
    out.max_group_size = static_cast<int>(*v);
  if (auto v = one_of<slo_bound>(w, "admission_bound",
                                 w.optional<std::string>("admission_bound",
                                                         std::string{to_string(out.admission_bound)})))
    out.admission_bound = *v;
  if (auto v = at_least<double>(w, "default_slo", w.optional<double>("default_slo", out.default_slo),
                                1.0))
    out.default_slo = *v;
  for (auto [key, field] : {std::pair{"warm_start_gbps_per_gpu", &weave_policy::warm_start_gbps_per_gpu},
                            std::pair{"cold_start_gbps", &weave_policy::cold_start_gbps},
                            std::pair{"intra_cluster_gbps", &weave_policy::intra_cluster_gbps}})
    if (auto v = positive(w, key, w.optional<double>(key, out.*field)))
      out.*field = *v;
  for (auto [key, field] : {std::pair{"cold_start_init_s", &weave_policy::cold_start_init_s},
                            std::pair{"tail_migration_cost_s", &weave_policy::tail_migration_cost_s}})
    if (auto v = non_negative(w, key, w.optional<double>(key, out.*field)))
      out.*field = *v;
  if (auto v = non_negative(w, "drift_margin", w.optional<double>("drift_margin", out.drift_margin)))
    out.drift_margin = *v;
  if (auto v = w.optional<bool>("consolidate", out.consolidate))
    out.consolidate = *v;
  if (auto v = w.optional<bool>("topology_aware_sync", out.topology_aware_sync))
    out.topology_aware_sync = *v;
  for (auto [key, field] : {std::pair{"overrun_factor", &weave_policy::overrun_factor},
                            std::pair{"stuck_factor", &weave_policy::stuck_factor}})
    if (auto v = at_least<double>(w, key, w.optional<double>(key, out.*field), 1.0))
      out.*field = *v;
  if (out.stuck_factor < out.overrun_factor)
    w.error("stuck_factor", fmt::format("must be at least overrun_factor ({}), got {}",
                                        out.overrun_factor, out.stuck_factor));
  w.reject_unknown();
}

void read_planner_policy(table_reader& p, planner_policy& out) {
  if (auto v = positive(p, "period_s", p.optional<double>("period_s", out.period_s)))
    out.period_s = *v;
  if (auto v = non_negative(p, "epsilon_s", p.optional<double>("epsilon_s", out.epsilon_s)))
    out.epsilon_s = *v;
  if (auto v = at_least<int64_t>(p, "histogram_bin_tokens",
                                 p.optional<int64_t>("histogram_bin_tokens",
                                                     out.histogram_bin_tokens),
                                 1))
    out.histogram_bin_tokens = static_cast<int>(*v);
  p.reject_unknown();
}

void read_balancer_policy(table_reader& b, balancer_policy& out) {
  if (auto v = non_negative(b, "theta", b.optional<double>("theta", out.theta)))
    out.theta = *v;
  if (auto v = positive(b, "tick_ms", b.optional<double>("tick_ms", out.tick_ms)))
    out.tick_ms = *v;
  b.reject_unknown();
}

void read_policy(table_reader& root, config& cfg) {
  auto pol = root.table("policy");
  if (!pol)
    return;
  auto& out = cfg.policy;
  if (auto w = pol->table("weave"))
    read_weave_policy(*w, out.weave);
  if (auto p = pol->table("planner"))
    read_planner_policy(*p, out.planner);
  if (auto b = pol->table("balancer"))
    read_balancer_policy(*b, out.balancer);
  if (auto f = pol->table("fabric")) {
    if (auto v = non_negative(*f, "safe_window_margin_ms",
                              f->optional<double>("safe_window_margin_ms",
                                                  out.fabric.safe_window_margin_ms)))
      out.fabric.safe_window_margin_ms = *v;
    if (auto v = within<int64_t>(*f, "health_poll_ms",
                                 f->optional<int64_t>("health_poll_ms", out.fabric.health_poll_ms),
                                 0, 3'600'000))
      out.fabric.health_poll_ms = uint32_t(*v);
    if (auto v = within<int64_t>(*f, "port_masks_per_minute",
                                 f->optional<int64_t>("port_masks_per_minute",
                                                      out.fabric.port_masks_per_minute),
                                 1, 4096))
      out.fabric.port_masks_per_minute = uint32_t(*v);
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
  cfg.text = std::string{text};
  read_service(root, cfg);
  read_endpoints(root, cfg);
  read_storage(root, cfg);
  id_registry node_ids{"node"};
  read_cluster(root, cfg, node_ids);
  const std::string config_dir =
    source_name.empty() || source_name.front() == '<'
      ? std::string{}
      : std::filesystem::path{source_name}.parent_path().string();
  read_fabric(root, cfg, node_ids, config_dir);
  read_security(root, cfg, config_dir);
  check_agent_keys(root, cfg);
  read_policy(root, cfg);
  read_generation(root, cfg, config_dir);
  read_ha(root, cfg, config_dir);
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

std::vector<std::string> changed_settings(const config& before, const config& after,
                                          const std::set<std::string>& except) {
  std::vector<config_error> ignored;
  auto a = parse_toml(before.text, before.source, ignored);
  auto b = parse_toml(after.text, after.source, ignored);
  std::set<std::string> changed;
  if (!a || !b)
    return {"(unreadable)"};
  auto rendered = [](const toml::node& n) {
    std::ostringstream os;
    n.visit([&](auto& v) { os << v; });
    return os.str();
  };
  auto differs = [&](const toml::node* x, const toml::node* y) {
    return !x || !y || rendered(*x) != rendered(*y);
  };
  for (const auto* doc : {&*a, &*b})
    for (auto& [section, node] : *doc) {
      const auto* x = a->get(section);
      const auto* y = b->get(section);
      if (!differs(x, y))
        continue;
      if (!x || !y || !x->is_table() || !y->is_table()) {
        changed.insert(std::string{section.str()});
        continue;
      }
      for (const auto* t : {x->as_table(), y->as_table()})
        for (auto& [key, _] : *t)
          if (differs(x->as_table()->get(key), y->as_table()->get(key)))
            changed.insert(fmt::format("{}.{}", section.str(), key.str()));
    }
  std::vector<std::string> out;
  for (auto& c : changed)
    if (!except.count(c))
      out.push_back(c);
  return out;
}

std::vector<std::string> apply_overrides(config& cfg, const service_overrides& o) {
  std::vector<std::string> errors;
  if (!o.storage.empty())
    cfg.storage.path = o.storage;
  if (!o.gateway.empty()) {
    if (valid_zmq_endpoint(o.gateway)) {
      if (cfg.ha && cfg.ha->advertise == cfg.endpoints.gateway)
        cfg.ha->advertise = o.gateway; // advertised as bound, unless [ha] names another
      cfg.endpoints.gateway = o.gateway;
    } else
      errors.push_back(fmt::format("--gateway: '{}' is not a ZeroMQ endpoint (tcp://HOST:PORT, "
                                   "ipc://PATH, inproc://NAME)",
                                   o.gateway));
  }
  if (!o.metrics.empty()) {
    if (valid_host_port(o.metrics))
      cfg.endpoints.metrics = o.metrics;
    else
      errors.push_back(fmt::format("--metrics: '{}' is not HOST:PORT with a port in 0..65535",
                                   o.metrics));
  }
  if (auto clash = endpoint_clash(cfg.endpoints.gateway, cfg.endpoints.metrics);
      clash && errors.empty())
    errors.push_back(fmt::format("--gateway/--metrics: {}", *clash));
  return errors;
}

} // namespace loom
