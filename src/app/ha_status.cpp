// `loom ha -c CONFIG`: the control plane on etcd as its replicas and etcd's members see it
// (docs/ha.md), read from etcd itself, so it answers with no leader at all. And where the
// admin commands find the leader.

#include "app/ha_status.hpp"

#include <cstdio>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/logging.hpp"
#include "ha/etcd.hpp"
#include "ha/keyspace.hpp"
#include "protocol/error.hpp"

namespace loom {

namespace {

struct ha_view {
  std::optional<replica_status> leader;
  std::vector<replica_status> replicas;
  int64_t revision = 0;
  std::vector<etcd_member_status> members;
  std::string error; // etcd could not be read
};

ha_view read_view(const ha_config& ha) {
  etcd_client etcd{{ha.endpoints, ha.tls, ha.request_timeout_ms}};
  keyspace keys{ha.prefix};
  ha_view v;
  auto leader = etcd.range(keys.leader());
  if (!leader) {
    v.error = message_of(leader.error());
  } else {
    v.revision = leader->revision;
    if (!leader->kvs.empty())
      v.leader = decode_replica(leader->kvs.front().value);
    if (auto replicas = etcd.range(keys.replicas(), range_end(keys.replicas())))
      for (auto& kv : replicas->kvs)
        if (auto r = decode_replica(kv.value))
          v.replicas.push_back(std::move(*r));
  }
  v.members = etcd.status();
  return v;
}

nlohmann::json json_of(const ha_view& v) {
  nlohmann::json replicas = nlohmann::json::array(), members = nlohmann::json::array();
  for (auto& r : v.replicas)
    replicas.push_back({{"name", r.name},
                        {"role", to_string(r.role)},
                        {"advertise", r.advertise},
                        {"metrics", r.metrics},
                        {"applied_revision", r.applied_revision},
                        {"lag_revisions", std::max<int64_t>(0, v.revision - r.applied_revision)},
                        {"pid", r.pid}});
  for (auto& m : v.members)
    members.push_back({{"endpoint", m.endpoint},
                       {"healthy", m.healthy},
                       {"error", m.error},
                       {"version", m.version},
                       {"db_size", m.db_size},
                       {"db_size_in_use", m.db_size_in_use},
                       {"member_id", fmt::format("{:x}", m.member_id)},
                       {"raft_leader", fmt::format("{:x}", m.leader)},
                       {"raft_index", m.raft_index}});
  return {{"leader", v.leader ? v.leader->name : ""},
          {"leader_endpoint", v.leader ? v.leader->advertise : ""},
          {"revision", v.revision},
          {"replicas", replicas},
          {"etcd", members},
          {"error", v.error}};
}

void print_view(const ha_view& v) {
  if (!v.error.empty())
    std::printf("etcd: %s\n", v.error.c_str());
  std::printf("leader: %s\n", v.leader ? fmt::format("{} at {}", v.leader->name,
                                                    v.leader->advertise)
                                             .c_str()
                                       : "none");
  std::printf("\n%-16s %-8s %-28s %-22s %12s %8s\n", "REPLICA", "ROLE", "ENDPOINT", "METRICS",
              "APPLIED", "LAG");
  for (auto& r : v.replicas)
    std::printf("%-16s %-8s %-28s %-22s %12lld %8lld\n", r.name.c_str(),
                std::string{to_string(r.role)}.c_str(), r.advertise.c_str(), r.metrics.c_str(),
                static_cast<long long>(r.applied_revision),
                static_cast<long long>(std::max<int64_t>(0, v.revision - r.applied_revision)));
  std::printf("\n%-28s %-8s %-8s %10s %10s %12s  %s\n", "ETCD", "HEALTH", "VERSION", "DB_BYTES",
              "IN_USE", "RAFT_INDEX", "ERROR");
  for (auto& m : v.members)
    std::printf("%-28s %-8s %-8s %10lld %10lld %12lld  %s\n", m.endpoint.c_str(),
                m.healthy ? "ok" : "down", m.version.c_str(), static_cast<long long>(m.db_size),
                static_cast<long long>(m.db_size_in_use), static_cast<long long>(m.raft_index),
                m.error.c_str());
}

class ha_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "ha", "Show the control plane on etcd ([ha]): the leader, every replica with how far its\n"
            "store is behind etcd, and each etcd member's health and size. Exits 1 without a\n"
            "leader or with an etcd member down.");
    cmd_->add_option("-c,--config", config_, "A replica's config (its [ha] section)")
      ->check(CLI::ExistingFile)
      ->required();
    cmd_->add_flag("--json", json_, "JSON for scripts");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    auto cfg = load_config(config_);
    if (!cfg)
      return exit_config_error;
    if (!cfg->ha) {
      std::fprintf(stderr, "ha: %s has no [ha] section: the service runs alone on its "
                           "RocksDB\n",
                   config_.c_str());
      return exit_config_error;
    }
    setup_logging(log_level::warn);
    auto view = read_view(*cfg->ha);
    if (json_)
      std::printf("%s\n", json_of(view).dump(2).c_str());
    else
      print_view(view);
    bool healthy = view.leader.has_value();
    for (auto& m : view.members)
      healthy &= m.healthy;
    return healthy ? 0 : exit_failure;
  }

private:
  CLI::App* cmd_ = nullptr;
  std::string config_;
  bool json_ = false;
};

} // namespace

std::string service_endpoints(const config& cfg) {
  if (!cfg.ha)
    return cfg.endpoints.gateway;
  auto view = read_view(*cfg.ha);
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& e) {
    if (!e.empty() && seen.insert(e).second)
      out.push_back(e);
  };
  if (view.leader)
    add(view.leader->advertise);
  for (auto& r : view.replicas)
    add(r.advertise);
  add(cfg.ha->advertise);
  return fmt::format("{}", fmt::join(out, ","));
}

std::unique_ptr<subcommand> ha_subcommand() {
  return std::make_unique<ha_command>();
}

} // namespace loom
