// The [ha] section: the etcd cluster a service's replicas share, this replica's name and
// address, its lease, and etcd's own limits (docs/ha.md).

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "config/config_parts.hpp"

namespace loom::config_parts {

namespace {

/// http://host:port or https://host:port: etcd's client URLs as `--advertise-client-urls`.
bool valid_etcd_url(std::string_view s) {
  for (std::string_view scheme : {"http://", "https://"})
    if (s.rfind(scheme, 0) == 0) {
      auto rest = s.substr(scheme.size());
      int port = 0;
      auto colon = rest.rfind(':');
      return colon != std::string_view::npos && colon > 0
             && parse_port(rest.substr(colon + 1), port) && port > 0;
    }
  return false;
}

bool valid_replica_name(std::string_view s) {
  return !s.empty() && s.size() <= 63
         && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
              == std::string_view::npos;
}

bool valid_prefix(std::string_view s) {
  return s.size() > 1 && s.front() == '/' && s.back() != '/' && s.find("//") == std::string_view::npos;
}

void read_endpoints(table_reader& ha, ha_config& out) {
  auto list = ha.required<std::vector<std::string>>("endpoints");
  if (!list)
    return;
  if (list->empty())
    ha.error("endpoints", "must name at least one etcd client URL");
  std::set<std::string> seen;
  for (auto& e : *list) {
    if (!valid_etcd_url(e))
      ha.error("endpoints", fmt::format("'{}' is not an etcd client URL (http://HOST:PORT or "
                                        "https://HOST:PORT)",
                                        e));
    else if (!seen.insert(e).second)
      ha.error("endpoints", fmt::format("'{}' is listed twice", e));
  }
  out.endpoints = std::move(*list);
}

void read_tls(table_reader& ha, ha_config& out, const std::string& config_dir) {
  auto tls = ha.table("tls");
  if (!tls)
    return;
  for (auto [key, field] : {std::pair{"ca_file", &out.tls.ca_file},
                            std::pair{"cert_file", &out.tls.cert_file},
                            std::pair{"key_file", &out.tls.key_file}}) {
    auto v = tls->optional<std::string>(key, "");
    if (!v || v->empty())
      continue;
    *field = resolve_path(config_dir, *v);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*field, ec))
      tls->error(key, fmt::format("'{}' is not a readable file", *field));
  }
  if (out.tls.cert_file.empty() != out.tls.key_file.empty())
    tls->error(out.tls.cert_file.empty() ? "key_file" : "cert_file",
               "cert_file and key_file go together (etcd's --client-cert-auth)");
  tls->reject_unknown();
}

} // namespace

void read_ha(table_reader& root, config& cfg, const std::string& config_dir) {
  auto ha = root.table("ha");
  if (!ha)
    return;
  ha_config out;
  read_endpoints(*ha, out);
  if (auto name = ha->required<std::string>("name")) {
    if (valid_replica_name(*name))
      out.name = *name;
    else
      ha->error("name", fmt::format("'{}' is not a replica name (1 to 63 of A-Z a-z 0-9 . _ -)",
                                    *name));
  }
  if (auto adv = ha->optional<std::string>("advertise", cfg.endpoints.gateway)) {
    out.advertise = *adv;
    auto host = adv->rfind("tcp://", 0) == 0 ? adv->substr(6, adv->rfind(':') - 6) : "";
    if (host == "*" || host == "0.0.0.0" || host == "[::]")
      ha->error("advertise", fmt::format("'{}' is no address a client can reach: name this "
                                         "replica's own host (the gateway may bind every "
                                         "interface)",
                                         *adv));
  }
  const std::string default_prefix = "/loom/" + cfg.cluster.name;
  if (auto p = ha->optional<std::string>("prefix", default_prefix)) {
    if (valid_prefix(*p))
      out.prefix = *p;
    else
      ha->error("prefix", fmt::format("'{}' is not a key prefix (starts with '/', no trailing "
                                      "'/', no empty segment)",
                                      *p));
  }
  if (auto v = within<int64_t>(*ha, "lease_ttl_s", ha->optional<int64_t>("lease_ttl_s", 5), 2,
                               600))
    out.lease_ttl_s = uint32_t(*v);
  if (auto v = within<int64_t>(*ha, "request_timeout_ms",
                               ha->optional<int64_t>("request_timeout_ms", 2000), 50, 60'000)) {
    out.request_timeout_ms = uint32_t(*v);
    // A renewal that times out once must leave time for another within the lease.
    if (*v * 2 > int64_t(out.lease_ttl_s) * 1000)
      ha->error("request_timeout_ms",
                fmt::format("{} ms is over half of lease_ttl_s = {} s: one slow renewal would "
                            "lose the lease",
                            *v, out.lease_ttl_s));
  }
  if (auto v = within<int64_t>(*ha, "max_txn_ops", ha->optional<int64_t>("max_txn_ops", 128), 8,
                               1'000'000))
    out.max_txn_ops = uint32_t(*v);
  if (auto v = within<int64_t>(*ha, "max_request_bytes",
                               ha->optional<int64_t>("max_request_bytes", 1'572'864), 65'536,
                               int64_t{1} << 30))
    out.max_request_bytes = uint32_t(*v);
  if (auto v = at_least<int64_t>(*ha, "event_retention",
                                 ha->optional<int64_t>("event_retention", 100'000), 0))
    out.event_retention = uint64_t(*v);
  if (auto v = at_least<int64_t>(*ha, "history_revisions",
                                 ha->optional<int64_t>("history_revisions", 10'000), 0)) {
    if (*v != 0 && *v < 100)
      ha->error("history_revisions", fmt::format("must be 0 (never compact) or at least 100, "
                                                 "got {}",
                                                 *v));
    out.history_revisions = uint64_t(*v);
  }
  read_tls(*ha, out, config_dir);
  ha->reject_unknown();
  cfg.ha = std::move(out);
}

} // namespace loom::config_parts
