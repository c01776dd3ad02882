#pragma once
// The whole configuration of one `loom serve`, loaded from TOML and validated strictly.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "generation/deployment_config.hpp"
#include "types/cluster.hpp"
#include "types/common.hpp"
#include "types/config_error.hpp"
#include "types/fabric_config.hpp"
#include "types/ha.hpp"
#include "types/policy.hpp"

namespace loom {

enum class log_level { trace, debug, info, warn, error };

template <>
struct enum_names<log_level> {
  static constexpr std::array<std::pair<log_level, std::string_view>, 5> table{{
    {log_level::trace, "trace"},
    {log_level::debug, "debug"},
    {log_level::info, "info"},
    {log_level::warn, "warn"},
    {log_level::error, "error"},
  }};
};

struct endpoints {
  std::string gateway; // ZeroMQ endpoint the gateway binds, e.g. tcp://127.0.0.1:5555
  std::string metrics; // host:port of the Prometheus exposer; port 0 picks a free port
};

/// ZeroMQ CURVE security of the gateway (on unless `insecure`). Key files hold Z85 keys as
/// `loom keygen` writes them; relative paths are from the config file's directory.
struct security_config {
  bool insecure = false;
  std::string keys_dir;        // server.pub/.secret (and a local admin.pub/.secret) live here;
                               // made on first start when absent; empty: STORAGE/keys
  std::map<worker_role, std::vector<std::string>> clients; // role -> public key files
  uint32_t heartbeat_ms = 2000;
  uint32_t heartbeat_misses = 3; // a worker silent this many intervals is declared dead
  uint32_t frames_per_s_per_key = 20'000; // frames of no session a key may send (0: no limit)
  uint32_t frames_per_s_per_session = 20'000; // frames a registered session may send (0: none)
  uint32_t sessions_per_key = 4096;       // live sessions one key may hold
};

struct storage_config {
  std::string path;        // RocksDB directory; relative paths are from the working directory
  bool sync_writes = true; // fsync acknowledged decisions
};

struct config {
  std::string source;     // file name, or "<embedded>"
  std::string text;       // the TOML it was read from (a reload compares against it)
  std::string service_name = "loom";
  log_level level = log_level::info;
  loom::endpoints endpoints;
  storage_config storage;
  security_config security;
  loom::cluster cluster;
  fabric_config fabric;
  loom::policy policy;
  std::vector<deployment_config> generation; // [[generation.deployments]]
  std::optional<ha_config> ha;               // [ha]: replicas on etcd; none: RocksDB alone
};

struct config_result {
  std::optional<config> value;
  std::vector<config_error> errors; // non-empty exactly when value is empty
};

/// Parses and validates TOML text; `source_name` is used in error messages.
config_result parse_config(std::string_view text, std::string source_name);

/// Reads and validates a file.
config_result load_config_file(const std::string& path);

/// The settings whose TOML differs between two configs, as `table.key` ("cluster.rollout",
/// "policy.weave", "security.heartbeat_ms"), leaving out `except` (the same form).
std::vector<std::string> changed_settings(const config& before, const config& after,
                                          const std::set<std::string>& except);

/// What `loom serve` takes from its command line over the config file (empty: keep).
struct service_overrides {
  std::string storage; // storage.path
  std::string gateway; // endpoints.gateway
  std::string metrics; // endpoints.metrics
};

/// Applies the overrides, validated as the config keys are; one message per bad value.
std::vector<std::string> apply_overrides(config& cfg, const service_overrides& o);

/// The text of conf/loom.toml, compiled into the binary.
std::string_view embedded_config_text();

} // namespace loom
